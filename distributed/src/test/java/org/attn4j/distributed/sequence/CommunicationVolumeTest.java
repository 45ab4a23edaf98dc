package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.testing.Ranks;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The bytes each worker sends, counted by the transport, equal the algorithms' communication formulas
 * (docs/algorithms.md). B = 2, H = 8, Hkv = 4, N = 64, D = 8, float64, P = 4, so a q shard is
 * {@code X_q = B H (N/P) D 8} bytes and a K or V shard {@code X_kv = B Hkv (N/P) D 8}; the ATTENTION2D grid
 * tests use N = 48 and P = 2 to 8.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CommunicationVolumeTest {

    private static final int P = 4;
    private static final int B = 2;
    private static final int H = 8;
    private static final int HKV = 4;
    private static final int N = 64;
    private static final int D = 8;
    private static final long W = Double.BYTES;
    private static final long XQ = (long) B * H * (N / P) * D * W;
    private static final long XKV = (long) B * HKV * (N / P) * D * W;
    /** The sequence length of the grid tests: a multiple of every P they use (2, 4, 6, 8). */
    private static final int GRID_N = 48;

    @Test
    void ringSendsKvShardsForwardAndKvPlusGradientsBackward() throws Exception {
        long[][] bytes = perWorker((t, in) -> {
            Communicator c = Communicator.world(t);
            RingAttention ring = new RingAttention(c, SequenceLayout.ZIGZAG, N, true, 0);
            RingAttention.Forward o = ring.forward(in[0], in[1], in[2], 0.35);
            long forward = c.bytesSent();
            ring.backward(in[0], in[1], in[2], o, in[0], 0.35);
            return new long[] {forward, c.bytesSent() - forward};
        });
        for (long[] b : bytes) {
            assertEquals((P - 1) * 2 * XKV, b[0], "ring forward: (P-1) K/V shards");
            assertEquals((P - 1) * 2 * XKV + P * 2 * XKV, b[1], "ring backward: (P-1) K/V shards + P dK/dV shards");
        }
    }

    @Test
    void ringWithoutGqaMovesTheQueriesBackwardAsBurstAttentionsAlgorithm2() throws Exception {
        // H = Hkv: the query side (q, dO, LSE, Delta, dQ) is smaller than K, V, dK, dV, so it travels.
        long lse = (long) B * H * (N / P) * W;
        long[][] bytes = perWorker((t, in) -> {
            Communicator c = Communicator.world(t);
            RingAttention ring = new RingAttention(c, SequenceLayout.ZIGZAG, N, true, 0);
            assertTrue(RingAttention.queriesTravel(in[0], in[0]));
            RingAttention.Forward o = ring.forward(in[0], in[0], in[0], 0.35);
            long forward = c.bytesSent();
            ring.backward(in[0], in[0], in[0], o, in[0], 0.35);
            return new long[] {forward, c.bytesSent() - forward};
        });
        for (long[] b : bytes) {
            assertEquals((P - 1) * 2 * XQ, b[0], "ring forward: (P-1) K/V shards");
            assertEquals((P - 1) * (3 * XQ + 2 * lse) + XQ, b[1],
                    "ring backward: (P-1) query bundles and dQ, and dQ home");
        }
    }

    @Test
    void windowedRingStopsEachShardOnceNoOneFurtherOnCanSeeIt() throws Exception {
        // Contiguous, causal, window N/P = 16: rank r's queries see keys of ranks r and r-1 only, so each K/V
        // shard makes one hop (S = 2 steps) instead of P - 1, and its dK/dV come straight back.
        long[][] bytes = perWorker((t, in) -> {
            Communicator c = Communicator.world(t);
            RingAttention ring = new RingAttention(c, SequenceLayout.CONTIGUOUS, N, true, N / P);
            assertEquals(2, ring.steps());
            RingAttention.Forward o = ring.forward(in[0], in[1], in[2], 0.35);
            long forward = c.bytesSent();
            ring.backward(in[0], in[1], in[2], o, in[0], 0.35);
            return new long[] {forward, c.bytesSent() - forward};
        });
        for (long[] b : bytes) {
            assertEquals(2 * XKV, b[0], "windowed ring forward: one K/V shard");
            assertEquals(2 * XKV + 2 * 2 * XKV, b[1], "windowed ring backward: one K/V shard + 2 dK/dV shards");
        }
    }

    @Test
    void ulyssesMovesTheShareOfOtherWorkersTwice() throws Exception {
        long[][] bytes = perWorker((t, in) -> {
            Communicator c = Communicator.world(t);
            UlyssesAttention u = new UlyssesAttention(c, SequenceLayout.CONTIGUOUS, N, true, 0);
            UlyssesAttention.Forward f = u.forward(in[0], in[1], in[2], 0.35);
            long forward = c.bytesSent();
            u.backward(in[0], in[1], in[2], f, in[0], 0.35);
            return new long[] {forward, c.bytesSent() - forward};
        });
        long lse = (long) B * H * (N / P) * W;
        for (long[] b : bytes) {
            // in: q, k, v to head shards; out: O and LSE back to sequence shards; (P-1)/P of each leaves
            assertEquals((P - 1) * (XQ + 2 * XKV + XQ + lse) / P, b[0], "Ulysses forward");
            // in: dO; out: dQ, dK, dV
            assertEquals((P - 1) * (XQ + XQ + 2 * XKV) / P, b[1], "Ulysses backward");
        }
    }

    @Test
    void laspPassesOneStatePerHeadAlongTheChain() throws Exception {
        long state = (long) B * H * D * D * W;
        long[][] bytes = perWorker((t, in) -> {
            Communicator c = Communicator.world(t);
            LaspAttention lasp = new LaspAttention(c, Decay.of(0.9), true);
            LaspAttention.Forward f = lasp.forward(in[0], in[1], in[2]);
            long forward = c.bytesSent();
            lasp.backward(in[0], in[1], in[2], f, in[0]);
            return new long[] {forward, c.bytesSent() - forward};
        });
        for (int r = 0; r < P; r++) {
            assertEquals(r < P - 1 ? state : 0, bytes[r][0], "LASP forward, rank " + r + ": kv to the next");
            assertEquals(r > 0 ? state : 0, bytes[r][1], "LASP backward, rank " + r + ": dKV to the previous");
        }
    }

    @Test
    void attention2dSendsOrderNOverSqrtPPerWorker() throws Exception {
        int g = 2;                                   // P = 4: a 2 x 2 grid
        long lse = (long) B * H * (N / P) * W;
        long[][] bytes = perWorker((t, in) -> {
            Attention2D a = new Attention2D(t, N, true, 0);
            long start = t.traffic().total();
            Attention2D.Forward f = a.forward(in[0], in[1], in[2], 0.35);
            long forward = t.traffic().total() - start;
            a.backward(in[0], in[1], in[2], f, in[0], 0.35);
            return new long[] {forward, t.traffic().total() - start - forward};
        });
        for (int w = 0; w < P; w++) {
            boolean diagonal = w % g == w / g;       // p(r, r) transposes with itself: nothing leaves
            long transpose = diagonal ? 0 : 2 * XKV;
            // row all-gather of q, column all-gather of k and v, row reduce-scatter of (O, LSE)
            assertEquals(transpose + (g - 1) * (XQ + 2 * XKV + XQ + lse), bytes[w][0], "ATTENTION2D forward, " + w);
            // row all-gather of q, O, dO, LSE; column all-gather of k, v; reduce-scatters of dQ, dK, dV; transpose
            assertEquals((g - 1) * (3 * XQ + lse + 2 * XKV + XQ + 2 * XKV) + transpose, bytes[w][1],
                    "ATTENTION2D backward, " + w);
        }
    }

    @ParameterizedTest(name = "P={0} C={1}")
    @CsvSource({"4, 1", "4, 2", "8, 1", "8, 2"})
    void wallFacerSendsItsFormula(int p, int c) throws Exception {
        long x = (long) B * H * (N / p) * D * W;
        long xkv = (long) B * HKV * (N / p) * D * W;
        long lse = (long) B * H * (N / p) * W;
        int r = p / (c * c);
        long[][] bytes = perWorker(p, N, (t, in) -> {
            WallFacerAttention wf = new WallFacerAttention(t, c, SequenceLayout.ZIGZAG, N, true, 0);
            long start = t.traffic().total();
            RingAttention.Forward f = wf.forward(in[0], in[1], in[2], 0.35);
            long forward = t.traffic().total() - start;
            wf.backward(in[0], in[1], in[2], f, in[0], 0.35);
            return new long[] {forward, t.traffic().total() - start - forward};
        });
        for (int w = 0; w < p; w++) {
            int l = w % c;
            long fwd = (c - 1) * (x + 2 * xkv) + (l != 0 ? 2 * c * xkv : 0) + (r - 1) * 2 * c * xkv
                    + (c - 1) * (x + lse);
            long bwd = (c - 1) * (2 * x + 2 * lse + 2 * xkv) + (l != 0 ? c * (2 * x + 2 * lse) : 0)
                    + (r - 1) * c * (2 * x + 2 * lse + x) + (l != 0 || r > 1 ? c * x : 0)
                    + (c - 1) * (x + 2 * xkv);
            assertEquals(fwd, bytes[w][0], "WallFacer forward, P=" + p + " C=" + c + " rank " + w);
            assertEquals(bwd, bytes[w][1], "WallFacer backward, P=" + p + " C=" + c + " rank " + w);
            if (c == 1) {
                assertEquals((p - 1) * 2 * xkv, bytes[w][0], "C = 1 forward is ring attention's");
            }
        }
    }

    @Test
    void attention2dOnRectanglesSendsTheGridFormula() throws Exception {
        for (ProcessorGrid g : new ProcessorGrid[] {new ProcessorGrid(3, 2), new ProcessorGrid(4, 2),
            new ProcessorGrid(2, 3)}) {
            assertGridVolume(g, t -> new Attention2D(t, g, GRID_N, true, 0), "ATTENTION2D-NO");
        }
    }

    @Test
    void attention2dOverlapSendsWhatTheNonOverlappingVariantSends() throws Exception {
        for (ProcessorGrid g : new ProcessorGrid[] {new ProcessorGrid(2, 2), new ProcessorGrid(3, 2),
            new ProcessorGrid(2, 1)}) {
            assertGridVolume(g, t -> new Attention2DOverlap(t, g, GRID_N, true, 0), "ATTENTION2D-O");
        }
    }

    interface GridAlgorithm {
        SequenceParallelAttention<Attention2D.Forward> create(Transport t);
    }

    /**
     * Per worker on an {@code R x C} grid, forward: the transpose ({@code 2 X_kv} unless the worker keeps its own
     * shard), {@code C-1} query blocks and {@code C-1} partial (O, LSE) blocks along the row, {@code R-1} K/V blocks
     * along the column; backward: {@code C-1} (Q, O, dO, LSE) and {@code C-1} dQ blocks along the row, {@code R-1}
     * K/V and {@code R-1} dK/dV blocks along the column, the transpose back.
     */
    private static void assertGridVolume(ProcessorGrid grid, GridAlgorithm algorithm, String what) throws Exception {
        int p = grid.size();
        long xq = (long) B * H * (GRID_N / p) * D * W;
        long xkv = (long) B * HKV * (GRID_N / p) * D * W;
        long xlse = (long) B * H * (GRID_N / p) * W;
        long[][] bytes = perWorker(p, GRID_N, (t, in) -> {
            SequenceParallelAttention<Attention2D.Forward> a = algorithm.create(t);
            long start = t.traffic().total();
            Attention2D.Forward f = a.forward(in[0], in[1], in[2], 0.35);
            long forward = t.traffic().total() - start;
            a.backward(in[0], in[1], in[2], f, in[0], 0.35);
            return new long[] {forward, t.traffic().total() - start - forward};
        });
        int r = grid.rows();
        int c = grid.columns();
        for (int w = 0; w < p; w++) {
            boolean keeps = grid.keyShard(grid.row(w), grid.column(w)) == w;
            long transpose = keeps ? 0 : 2 * xkv;
            String ctx = what + " on " + grid + ", worker " + w;
            assertEquals(transpose + (c - 1) * (2 * xq + xlse) + (r - 1) * 2 * xkv, bytes[w][0], ctx + ", forward");
            assertEquals((c - 1) * (4 * xq + xlse) + (r - 1) * 4 * xkv + transpose, bytes[w][1], ctx + ", backward");
        }
    }

    interface Body {
        long[] run(Transport t, INDArray[] qkv) throws Exception;
    }

    private static long[][] perWorker(Body body) throws Exception {
        return perWorker(P, N, body);
    }

    private static long[][] perWorker(int p, int n, Body body) throws Exception {
        INDArray[][] in = new INDArray[p][];
        for (int r = 0; r < p; r++) {
            in[r] = new INDArray[] {
                Nd4j.rand(DataType.DOUBLE, B, H, n / p, D),
                Nd4j.rand(DataType.DOUBLE, B, HKV, n / p, D),
                Nd4j.rand(DataType.DOUBLE, B, HKV, n / p, D)};
        }
        return Ranks.runInJvm(p, Duration.ofSeconds(20), Duration.ofSeconds(30), t -> body.run(t, in[t.rank()]))
                .toArray(new long[0][]);
    }
}
