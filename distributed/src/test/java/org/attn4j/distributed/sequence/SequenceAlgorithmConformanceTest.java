package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.ops.Documents;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Every listed algorithm ({@link SequenceAlgorithm#all()}) held to the same contract on P in-JVM ranks: for each P
 * in {1, 2, 3, 4, 6, 8} its settings accept (its layout, its head constraints), causal and full, float64 with
 * grouped K/V heads, its outputs and gradients equal the single-device op on the same seeded inputs to 1e-12; the
 * bytes each rank's transport sent in each pass equal the descriptor's {@link SequenceAlgorithm#volume} exactly;
 * and a shard of the wrong size is refused by every rank in one line before any byte is sent. The same contract
 * over Aeron worker processes is {@code SequenceProcessTest}.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class SequenceAlgorithmConformanceTest {

    private static final int N = 48;
    private static final int B = 1;
    private static final int H = 12;
    private static final int HKV = 6;
    private static final int D = 4;
    private static final double SCALE = 0.4;
    private static final double TOL = 1e-12;

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (SequenceAlgorithm algorithm : SequenceAlgorithm.all()) {
            for (int p : new int[] {1, 2, 3, 4, 6, 8}) {
                for (boolean causal : new boolean[] {true, false}) {
                    if (accepts(algorithm, settings(algorithm, p, causal))) {
                        a.add(Arguments.of(algorithm, p, causal));
                    }
                }
            }
        }
        return a.stream();
    }

    private static SequenceAlgorithm.Settings settings(SequenceAlgorithm algorithm, int p, boolean causal) {
        SequenceAlgorithm.Settings s = SequenceAlgorithm.Settings.of(p, N, causal).withHeads(H, HKV);
        return algorithm.softmax() || !causal ? s : s.withOption("decay", 0.9);
    }

    private static boolean accepts(SequenceAlgorithm algorithm, SequenceAlgorithm.Settings s) {
        try {
            algorithm.validate(s);
            return true;
        } catch (IllegalArgumentException e) {
            return false;
        }
    }

    /** Each algorithm runs at three or more of the worker counts, so a constraint too strict shows here. */
    @Test
    void everyAlgorithmRunsAtSeveralWorkerCounts() {
        for (SequenceAlgorithm algorithm : SequenceAlgorithm.all()) {
            long ps = cases().filter(c -> c.get()[0].equals(algorithm)).map(c -> c.get()[1]).distinct().count();
            assertTrue(ps >= 3, algorithm + " runs at only " + ps + " worker counts");
        }
    }

    @ParameterizedTest(name = "{0} P={1} causal={2}")
    @MethodSource("cases")
    void equalsTheSingleDeviceOpAndSendsItsFormula(SequenceAlgorithm algorithm, int p, boolean causal)
            throws Exception {
        SequenceAlgorithm.Settings s = settings(algorithm, p, causal);
        SequenceLayout layout = algorithm.layout(s);
        long seed = 1000L * SequenceAlgorithm.all().indexOf(algorithm) + 10L * p + (causal ? 1 : 0);
        INDArray q = randn(seed, DataType.DOUBLE, B, H, N, D);
        INDArray k = randn(seed + 1, DataType.DOUBLE, B, HKV, N, D);
        INDArray v = randn(seed + 2, DataType.DOUBLE, B, HKV, N, D);
        INDArray dO = randn(seed + 3, DataType.DOUBLE, B, H, N, D);

        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            int r = t.rank();
            SequenceParallelAttention<?> attention = algorithm.create(t, s);
            return run(attention, layout.shard(q, r, p), layout.shard(k, r, p), layout.shard(v, r, p),
                    layout.shard(dO, r, p), algorithm.softmax() ? SCALE : 1.0, t);
        });

        INDArray[] expected = expected(algorithm, s, q, k, v, dO);
        String ctx = algorithm + " P=" + p + " causal=" + causal + " " + layout;
        String[] names = {"O", "LSE", "dQ", "dK", "dV"};
        for (int i = 0; i < names.length; i++) {
            if (expected[i] != null) {
                assertClose(names[i], layout.unshard(parts[i]), expected[i], TOL, ctx);
            }
        }
        SequenceAlgorithm.ShardBytes x = SequenceAlgorithm.ShardBytes.of(B, H, HKV, N / p, D, Double.BYTES);
        for (int r = 0; r < p; r++) {
            SequenceAlgorithm.Volume formula = algorithm.volume(s, x, r);
            long[] sent = parts[5][r].toLongVector();
            assertEquals(formula, new SequenceAlgorithm.Volume(sent[0], sent[1]), ctx + ", bytes of rank " + r);
        }
    }

    static Stream<Arguments> documentCases() {
        List<Arguments> a = new ArrayList<>();
        for (SequenceAlgorithm algorithm : SequenceAlgorithm.all()) {
            for (int p : new int[] {2, 3, 4}) {
                for (boolean causal : new boolean[] {true, false}) {
                    if (accepts(algorithm, settings(algorithm, p, causal))) {
                        a.add(Arguments.of(algorithm, p, causal));
                    }
                }
            }
        }
        return a.stream();
    }

    /**
     * Packed sequences: two sequences of random documents with padding between some; every algorithm equals the
     * single-device op with the same documents to 1e-12, and sends what its formula says (documents change what
     * is computed, not what travels), except non-causal LASP, which sums only the documents that straddle shards.
     */
    @ParameterizedTest(name = "{0} P={1} causal={2}")
    @MethodSource("documentCases")
    void withDocumentsEqualsTheSingleDeviceOp(SequenceAlgorithm algorithm, int p, boolean causal) throws Exception {
        int b = 2;
        SequenceAlgorithm.Settings s = settings(algorithm, p, causal);
        SequenceLayout layout = algorithm.layout(s);
        long seed = 5000L * SequenceAlgorithm.all().indexOf(algorithm) + 10L * p + (causal ? 1 : 0);
        Documents docs = Documents.random(seed, b, N, 14);
        INDArray q = randn(seed, DataType.DOUBLE, b, H, N, D);
        INDArray k = randn(seed + 1, DataType.DOUBLE, b, HKV, N, D);
        INDArray v = randn(seed + 2, DataType.DOUBLE, b, HKV, N, D);
        INDArray dO = randn(seed + 3, DataType.DOUBLE, b, H, N, D);

        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            int r = t.rank();
            SequenceParallelAttention<?> attention = algorithm.create(t, s).withDocuments(docs);
            return run(attention, layout.shard(q, r, p), layout.shard(k, r, p), layout.shard(v, r, p),
                    layout.shard(dO, r, p), algorithm.softmax() ? SCALE : 1.0, t);
        });

        INDArray[] expected = expected(algorithm, s, q, k, v, dO, docs);
        String ctx = algorithm + " P=" + p + " causal=" + causal + " " + layout + " with documents";
        String[] names = {"O", "LSE", "dQ", "dK", "dV"};
        for (int i = 0; i < names.length; i++) {
            if (expected[i] != null) {
                assertClose(names[i], layout.unshard(parts[i]), expected[i], TOL, ctx);
            }
        }
        if (!algorithm.softmax() && !causal) {
            return;             // non-causal LASP with documents sums only the documents straddling the shards
        }
        SequenceAlgorithm.ShardBytes x = SequenceAlgorithm.ShardBytes.of(b, H, HKV, N / p, D, Double.BYTES);
        for (int r = 0; r < p; r++) {
            SequenceAlgorithm.Volume formula = algorithm.volume(s, x, r);
            long[] sent = parts[5][r].toLongVector();
            assertEquals(formula, new SequenceAlgorithm.Volume(sent[0], sent[1]), ctx + ", bytes of rank " + r);
        }
    }

    /** Ring-style hops whose queries and keys share no document (that the causal rule lets them see) are skipped. */
    @Test
    void blocksSharingNoDocumentAreSkipped() {
        int[] first = SequenceLayout.CONTIGUOUS.positions(0, 2, N);
        int[] second = SequenceLayout.CONTIGUOUS.positions(1, 2, N);
        AttentionMask two = AttentionMask.builder().documents(Documents.packed(1, N, N / 2, N / 2)).build();
        AttentionMask one = AttentionMask.builder().documents(Documents.packed(1, N, N)).build();
        assertTrue(BlockMasks.fullyMasked(two, second, first), "two documents, one per shard");
        assertFalse(BlockMasks.fullyMasked(one, second, first), "one document over both shards");
        AttentionMask oneCausal = one.toBuilder().causal(true).build();
        assertTrue(BlockMasks.fullyMasked(oneCausal, first, second), "causal: later keys of the same document");
        AttentionMask straddling = AttentionMask.builder().causal(true)
                .documents(Documents.packed(1, N, N / 2 - 3, N / 2 + 3)).build();
        assertFalse(BlockMasks.fullyMasked(straddling, second, first), "a document straddling the shards");
    }

    /** A worker whose document ids differ from the others' makes every worker fail, naming it. */
    @Test
    void workersWithDifferentDocumentsAllFailNamingTheOddOne() throws Exception {
        Documents docs = Documents.random(1, 1, N, 10);
        Documents other = Documents.random(2, 1, N, 10);
        INDArray[][] messages = SequenceTesting.onRanks(3, t -> {
            try {
                DocumentAgreement.require(org.attn4j.distributed.collective.Communicator.world(t),
                        t.rank() == 2 ? other : docs);
                return new INDArray[] {org.nd4j.linalg.factory.Nd4j.scalar(0.0)};
            } catch (IllegalArgumentException e) {
                assertTrue(e.getMessage().startsWith("document ids differ between workers: rank 2 has [1, 48] ids"),
                        e.getMessage());
                return new INDArray[] {org.nd4j.linalg.factory.Nd4j.scalar(1.0)};
            }
        });
        for (int r = 0; r < 3; r++) {
            assertEquals(1.0, messages[0][r].getDouble(0), "rank " + r + " failed");
        }
    }

    /** Documents that do not cover N are refused by every algorithm in one line naming both lengths. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("org.attn4j.distributed.sequence.SequenceTesting#algorithms")
    void documentsOfAnotherLengthAreRefused(SequenceAlgorithm algorithm) throws Exception {
        int p = 2;
        SequenceAlgorithm.Settings s = settings(algorithm, p, true);
        try (Ranks ranks = Ranks.inJvm(p, java.time.Duration.ofSeconds(10))) {
            SequenceParallelAttention<?> a = algorithm.create(ranks.transports().get(0), s);
            Documents shorter = Documents.packed(1, N - 2, N - 2);
            String m = "";
            try {
                // The linear algorithms check the length against the shards, at the forward pass.
                a.withDocuments(shorter).forward(randn(1, DataType.DOUBLE, B, H, N / p, D),
                        randn(2, DataType.DOUBLE, B, HKV, N / p, D), randn(3, DataType.DOUBLE, B, HKV, N / p, D), 1.0);
            } catch (IllegalArgumentException e) {
                m = String.valueOf(e.getMessage());
            }
            assertFalse(m.contains("\n"), algorithm + ": one line, got " + m);
            assertTrue(m.contains(Integer.toString(N)) && m.contains(Integer.toString(N - 2)),
                    algorithm + ": names " + N + " and " + (N - 2) + ": '" + m + "'");
        }
    }

    /** O, LSE (null for linear attention), dQ, dK, dV, and the bytes sent forward and backward. */
    private static <F extends SequenceParallelAttention.Pass> INDArray[] run(SequenceParallelAttention<F> a,
                                                                             INDArray q, INDArray k, INDArray v,
                                                                             INDArray dO, double scale, Transport t) {
        t.traffic().reset();
        F f = a.forward(q, k, v, scale);
        long forward = t.traffic().total();
        AttentionGradients g = a.backward(q, k, v, f, dO, scale);
        long backward = t.traffic().total() - forward;
        INDArray bytes = org.nd4j.linalg.factory.Nd4j.createFromArray(forward, backward);
        return new INDArray[] {f.output(), f.lse(), g.dq(), g.dk(), g.dv(), bytes};
    }

    private static INDArray[] expected(SequenceAlgorithm algorithm, SequenceAlgorithm.Settings s, INDArray q,
                                       INDArray k, INDArray v, INDArray dO) {
        return expected(algorithm, s, q, k, v, dO, null);
    }

    private static INDArray[] expected(SequenceAlgorithm algorithm, SequenceAlgorithm.Settings s, INDArray q,
                                       INDArray k, INDArray v, INDArray dO, Documents docs) {
        if (algorithm.softmax()) {
            AttentionMask mask = AttentionMask.builder().causal(s.causal()).documents(docs).build();
            FlashAttention flash = FlashAttention.defaults();
            AttentionOutput o = flash.forward(q, k, v, mask, SCALE);
            AttentionGradients g = flash.backward(q, k, v, o.output(), o.lse(), dO, mask, SCALE);
            return new INDArray[] {o.output(), o.lse(), g.dq(), g.dk(), g.dv()};
        }
        Decay decay = s.causal() ? Decay.of(algorithm.option(s, "decay")) : Decay.none();
        LinearAttention linear = LinearAttention.defaults();
        LinearAttentionOutput o = linear.forward(q, k, v, decay, s.causal(), null, docs);
        LinearAttentionGradients g = linear.backward(q, k, v, decay, s.causal(), null, dO, null, o.cache(), docs);
        return new INDArray[] {o.output(), null, g.dq(), g.dk(), g.dv()};
    }

    /**
     * Key shards one position short: every rank's forward pass fails with one line naming the
     * expected and the actual size, and no rank sent a byte.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("org.attn4j.distributed.sequence.SequenceTesting#algorithms")
    void aShardOfTheWrongSizeIsRefusedBeforeAnyByteIsSent(SequenceAlgorithm algorithm) throws Exception {
        int p = 2;
        SequenceAlgorithm.Settings s = settings(algorithm, p, true);
        try (Ranks ranks = Ranks.inJvm(p, java.time.Duration.ofSeconds(10))) {
            for (Transport t : ranks.transports()) {
                SequenceParallelAttention<?> a = algorithm.create(t, s);
                int rows = N / p - 1;
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> a.forward(randn(1, DataType.DOUBLE, B, H, N / p, D),
                                randn(2, DataType.DOUBLE, B, HKV, rows, D),
                                randn(3, DataType.DOUBLE, B, HKV, rows, D), 1.0), algorithm + " rank " + t.rank());
                String m = String.valueOf(e.getMessage());
                assertFalse(m.contains("\n"), algorithm + ": one line, got " + m);
                assertTrue(m.contains(Integer.toString(rows)), algorithm + ": names the size " + rows + ": " + m);
                assertEquals(0, t.traffic().total(), algorithm + " rank " + t.rank() + " sent bytes");
            }
        }
    }
}
