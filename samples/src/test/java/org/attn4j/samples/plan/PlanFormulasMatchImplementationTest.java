package org.attn4j.samples.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.sequence.Attention2D;
import org.attn4j.distributed.sequence.Attention2DOverlap;
import org.attn4j.distributed.sequence.LaspAttention;
import org.attn4j.distributed.sequence.ProcessorGrid;
import org.attn4j.distributed.sequence.RingAttention;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.sequence.UlyssesAttention;
import org.attn4j.distributed.sequence.WallFacerAttention;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.samples.plan.CommunicationFormulas.Volume;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * attn4j's algorithms, run in one JVM, send per rank exactly the bytes of {@link CommunicationFormulas} (the
 * transport's counters), so the plan prices what attn4j sends. B 1, H 4, Hkv 2 (GQA) or 4, N/P 4, D 4, float64.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PlanFormulasMatchImplementationTest {

    private static final int B = 1;
    private static final int H = 4;
    private static final int HKV = 2;
    private static final int SHARD = 4;
    private static final int D = 4;
    private static final long W = Double.BYTES;
    private static final long XQ = (long) B * H * SHARD * D * W;
    private static final long XKV = (long) B * HKV * SHARD * D * W;
    private static final long XLSE = (long) B * H * SHARD * W;

    @ParameterizedTest(name = "Hkv = {0}")
    @ValueSource(ints = {H, HKV})
    void ringSendsTheFormula(int kvHeads) throws Exception {
        long xkv = (long) B * kvHeads * SHARD * D * W;
        INDArray q = Nd4j.zeros(DataType.DOUBLE, B, H, SHARD, D);
        INDArray k = Nd4j.zeros(DataType.DOUBLE, B, kvHeads, SHARD, D);
        // H = Hkv moves the queries backward (BurstAttention's algorithm 2), H = 2 Hkv moves K/V
        assertEquals(kvHeads == H, RingAttention.queriesTravel(q, k));
        assertEquals(RingAttention.queriesTravel(q, k), CommunicationFormulas.ringMovesQueries(XQ, xkv, XLSE));
        long[][] sent = run(4, kvHeads, t -> new RingAttention(Communicator.world(t), SequenceLayout.ZIGZAG,
                4 * SHARD, true, 0));
        for (int r = 0; r < 4; r++) {
            assertEquals(CommunicationFormulas.ring(4, XQ, xkv, XLSE), new Volume(sent[r][0], sent[r][1]),
                    "rank " + r);
        }
    }

    @Test
    void ulyssesSendsTheFormula() throws Exception {
        long[][] sent = run(2, HKV, t -> new UlyssesAttention(Communicator.world(t), SequenceLayout.CONTIGUOUS,
                2 * SHARD, true, 0));
        for (long[] s : sent) {
            assertEquals(CommunicationFormulas.ulysses(2, XQ, XKV, XLSE), new Volume(s[0], s[1]));
        }
    }

    @ParameterizedTest(name = "{0} x {1}, overlap {2}")
    @CsvSource({"2, 2, false", "3, 2, false", "2, 3, false", "2, 2, true", "3, 2, true", "2, 3, true"})
    void attention2dSendsTheFormulaOnItsGrid(int rows, int columns, boolean overlap) throws Exception {
        ProcessorGrid grid = new ProcessorGrid(rows, columns);
        int p = grid.size();
        long[][] sent = run(p, HKV, t -> overlap ? new Attention2DOverlap(t, grid, p * SHARD, true, 0)
                : new Attention2D(t, grid, p * SHARD, true, 0));
        for (int w = 0; w < p; w++) {
            boolean moves = grid.keyShard(grid.row(w), grid.column(w)) != w;
            Volume expected = CommunicationFormulas.attention2d(rows, columns, moves, XQ, XKV, XLSE);
            assertEquals(expected, new Volume(sent[w][0], sent[w][1]), grid + ", rank " + w);
        }
    }

    @ParameterizedTest(name = "P = {0}, C = {1}")
    @CsvSource({"4, 1", "4, 2", "8, 1", "8, 2"})
    void wallFacerSendsTheFormula(int p, int c) throws Exception {
        long[][] sent = run(p, HKV, t -> new WallFacerAttention(t, c, SequenceLayout.ZIGZAG, p * SHARD, true, 0));
        for (int r = 0; r < p; r++) {
            Volume expected = CommunicationFormulas.wallFacer(p, c, r % c, XQ, XKV, XLSE);
            assertEquals(expected, new Volume(sent[r][0], sent[r][1]), "P = " + p + ", C = " + c + ", rank " + r);
        }
    }

    @Test
    void laspSendsOneStateAlongTheChain() throws Exception {
        long[][] sent = run(4, HKV, t -> new LaspAttention(Communicator.world(t), Decay.of(0.9), true));
        long state = (long) B * H * D * D * W;
        for (int r = 0; r < 4; r++) {
            assertEquals(CommunicationFormulas.laspCausal(4, r, state), new Volume(sent[r][0], sent[r][1]),
                    "rank " + r);
        }
    }

    interface Factory {
        SequenceParallelAttention<?> create(Transport t);
    }

    /** Runs forward and backward on every rank with {@code kvHeads} K/V heads; {forward, backward} bytes per rank. */
    private static long[][] run(int p, int kvHeads, Factory factory) throws Exception {
        List<InJvmTransport> transports = InJvmTransport.group(p, Duration.ofSeconds(30));
        ExecutorService pool = Executors.newFixedThreadPool(p);
        try {
            List<Future<long[]>> futures = new ArrayList<>();
            for (Transport t : transports) {
                futures.add(pool.submit(() -> passes(t, kvHeads, factory.create(t))));
            }
            long[][] out = new long[p][];
            for (int r = 0; r < p; r++) {
                out[r] = futures.get(r).get(60, TimeUnit.SECONDS);
            }
            return out;
        } finally {
            pool.shutdownNow();
            transports.forEach(Transport::close);
        }
    }

    private static <F extends SequenceParallelAttention.Pass> long[] passes(Transport t, int kvHeads,
                                                                         SequenceParallelAttention<F> a) {
        INDArray q = Nd4j.rand(DataType.DOUBLE, B, H, SHARD, D);
        INDArray k = Nd4j.rand(DataType.DOUBLE, B, kvHeads, SHARD, D);
        INDArray v = Nd4j.rand(DataType.DOUBLE, B, kvHeads, SHARD, D);
        long start = t.traffic().total();
        F f = a.forward(q, k, v, 0.5);
        long forward = t.traffic().total() - start;
        a.backward(q, k, v, f, q, 0.5);
        return new long[] {forward, t.traffic().total() - start - forward};
    }
}
