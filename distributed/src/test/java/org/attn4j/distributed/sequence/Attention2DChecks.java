package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.junit.jupiter.params.provider.Arguments;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * What the tests of {@link Attention2D} and {@link Attention2DOverlap} share: the grid cases and the comparison of
 * one variant's gathered O, LSE, dQ, dK, dV with single-device flash attention on the same seeded inputs.
 */
final class Attention2DChecks {

    /** N = 72 splits over every P used here (1, 2, 4, 6, 8, 9). */
    static final int N = 72;
    private static final int B = 2;
    private static final int H = 4;
    private static final int D = 8;

    private Attention2DChecks() {
    }

    /** Builds one variant on one worker; a null grid means the default one. */
    interface Variant {
        SequenceParallelAttention<Attention2D.Forward> create(Transport t, ProcessorGrid grid, int n, boolean causal,
                                                               int window);
    }

    /** One comparison: P workers on {@code grid} (null: the default), mask, K/V heads, type. */
    record Case(int p, ProcessorGrid grid, boolean causal, int window, int kvHeads, DataType type) {
        double tolerance() {
            return type == DataType.DOUBLE ? 1e-12 : 1e-5;
        }

        long seed() {
            return 1000L * p + 100L * (grid == null ? 0 : grid.rows()) + 10L * kvHeads + (causal ? 1 : 0) + window;
        }

        @Override
        public String toString() {
            return "P=" + p + " grid " + (grid == null ? ProcessorGrid.forWorkers(p) + " (default)" : grid)
                    + (causal ? " causal" : " full") + (window > 0 ? " window " + window : "") + " H=" + H
                    + " Hkv=" + kvHeads + " " + type;
        }
    }

    /**
     * Float64, default grids: P in {1, 2, 4, 6, 8, 9} (square and rectangular), causal and full, GQA and not;
     * explicit grids (the other orientation, single rows and columns); sliding windows; float32.
     */
    static Stream<Arguments> cases() {
        List<Case> c = new ArrayList<>();
        for (int p : new int[] {1, 2, 4, 6, 8, 9}) {
            for (boolean causal : new boolean[] {true, false}) {
                for (int kvHeads : new int[] {2, H}) {
                    c.add(new Case(p, null, causal, 0, kvHeads, DataType.DOUBLE));
                }
            }
        }
        for (ProcessorGrid g : new ProcessorGrid[] {new ProcessorGrid(1, 2), new ProcessorGrid(1, 4),
            new ProcessorGrid(4, 1), new ProcessorGrid(2, 3), new ProcessorGrid(2, 4)}) {
            c.add(new Case(g.size(), g, true, 0, 2, DataType.DOUBLE));
        }
        c.add(new Case(6, null, true, 13, 2, DataType.DOUBLE));
        c.add(new Case(8, null, false, 13, H, DataType.DOUBLE));
        c.add(new Case(9, null, true, 5, 2, DataType.DOUBLE));
        c.add(new Case(4, null, true, 0, 2, DataType.FLOAT));
        c.add(new Case(6, null, true, 0, 2, DataType.FLOAT));
        c.add(new Case(8, null, false, 0, H, DataType.FLOAT));
        return c.stream().map(Arguments::of);
    }

    /** Runs {@code variant} on the case's grid and asserts every gathered result against single-device flash. */
    static void matchesSingleDevice(Variant variant, Case c) throws Exception {
        long seed = c.seed();
        DataType type = c.type();
        INDArray q = randn(seed, type, B, H, N, D);
        INDArray k = randn(seed + 1, type, B, c.kvHeads(), N, D);
        INDArray v = randn(seed + 2, type, B, c.kvHeads(), N, D);
        INDArray g = randn(seed + 3, type, B, H, N, D);
        double scale = FlashAttention.defaultScale(D);
        AttentionMask mask = AttentionMask.builder().causal(c.causal()).window(c.window()).build();
        AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, mask, scale);
        AttentionGradients wg = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g, mask,
                scale);
        int p = c.p();
        SequenceLayout cyclic = SequenceLayout.STRIPED;
        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            SequenceParallelAttention<Attention2D.Forward> a = variant.create(t, c.grid(), N, c.causal(), c.window());
            int r = t.rank();
            INDArray lq = cyclic.shard(q, r, p);
            INDArray lk = cyclic.shard(k, r, p);
            INDArray lv = cyclic.shard(v, r, p);
            Attention2D.Forward f = a.forward(lq, lk, lv, scale);
            AttentionGradients lg = a.backward(lq, lk, lv, f, cyclic.shard(g, r, p), scale);
            return new INDArray[] {f.output(), f.lse(), lg.dq(), lg.dk(), lg.dv()};
        });
        String ctx = c + ", seed " + seed;
        double tol = c.tolerance();
        assertClose("O", cyclic.unshard(parts[0]), whole.output(), tol, ctx);
        assertClose("LSE", cyclic.unshard(parts[1]), whole.lse(), tol, ctx);
        assertClose("dQ", cyclic.unshard(parts[2]), wg.dq(), tol, ctx);
        assertClose("dK", cyclic.unshard(parts[3]), wg.dk(), tol, ctx);
        assertClose("dV", cyclic.unshard(parts[4]), wg.dv(), tol, ctx);
    }

    /** A grid that does not hold exactly the transport's workers is refused by the constructor. */
    static void refusesAGridOfAnotherSize(Variant variant, String op) {
        onIdleRanks(6, t -> {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> variant.create(t, new ProcessorGrid(2, 2), N, true, 0));
            assertMessage(op + ": grid 2 x 2 has 4 processors; the transport has 6 workers", e);
        });
    }

    /** A sequence length that the cyclic layout cannot split over P is refused by the constructor. */
    static void refusesALengthThatDoesNotSplit(Variant variant, String op) {
        onIdleRanks(6, t -> {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> variant.create(t, null, 70, true, 0));
            assertMessage(op + ": sequence length 70 must be a positive multiple of the 6 workers", e);
        });
    }

    /**
     * A shard of the wrong length, or a dO that does not match q, fails on one rank alone, before anything is
     * sent (the other ranks never call, so a send would only show in the traffic count, a receive would hang).
     */
    static void refusesWrongShardsBeforeSending(Variant variant, String op) {
        onIdleRanks(4, t -> {
            SequenceParallelAttention<Attention2D.Forward> a = variant.create(t, null, N, true, 0);
            INDArray q = Nd4j.zeros(DataType.DOUBLE, 1, H, 10, D);
            INDArray kv = Nd4j.zeros(DataType.DOUBLE, 1, 2, 10, D);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> a.forward(q, kv, kv, 0.35));
            assertMessage(op + ": 18 query positions for 10 queries", e);
            INDArray q18 = Nd4j.zeros(DataType.DOUBLE, 1, H, N / 4, D);
            INDArray kv18 = Nd4j.zeros(DataType.DOUBLE, 1, 2, N / 4, D);
            INDArray dO = Nd4j.zeros(DataType.DOUBLE, 1, H, N / 4 - 1, D);
            e = assertThrows(IllegalArgumentException.class, () -> a.backward(q18, kv18, kv18, null, dO, 0.35));
            assertMessage(op + ": dO must be DOUBLE [1, 4, 18, 8] like q, got DOUBLE [1, 4, 17, 8]", e);
            assertEquals(0, t.traffic().total(), "bytes sent before the input was refused");
        });
    }

    private interface RankCheck {
        void run(Transport t);
    }

    /** Runs {@code check} on rank 0 of a fresh in-JVM group of {@code p} whose other ranks do nothing. */
    private static void onIdleRanks(int p, RankCheck check) {
        try (Ranks ranks = Ranks.inJvm(p, Duration.ofSeconds(5))) {
            check.run(ranks.transport(0));
        }
    }

    private static void assertMessage(String expected, Exception e) {
        assertTrue(e.getMessage() != null && e.getMessage().contains(expected),
                "expected a message containing \"" + expected + "\", got: " + e.getMessage());
    }
}
