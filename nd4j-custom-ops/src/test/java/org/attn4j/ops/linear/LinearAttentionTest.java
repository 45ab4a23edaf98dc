package org.attn4j.ops.linear;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.stream.Stream;

import org.attn4j.ops.Documents;
import org.attn4j.ops.testing.ReferenceLinearAttention;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** The chunked linear attention op against the plain recurrence, and its state API. */
class LinearAttentionTest {

    static Stream<Arguments> cases() {
        // n, d, batch, heads, kvHeads, chunk, lambdas (one value = shared)
        return Stream.of(
                Arguments.of(1, 8, 1, 1, 1, 4, new double[] {0.9}),
                Arguments.of(7, 8, 2, 2, 1, 3, new double[] {1.0}),
                Arguments.of(7, 24, 1, 4, 2, 7, new double[] {0.5, 0.8, 0.95, 1.0}),
                Arguments.of(113, 16, 2, 2, 2, 16, new double[] {0.97}),
                Arguments.of(113, 8, 1, 4, 1, 113, new double[] {0.9, 0.99, 0.999, 1.0}),
                Arguments.of(203, 24, 1, 2, 1, 29, new double[] {1.0}),
                Arguments.of(203, 8, 2, 3, 3, 64, Decay.transNormerSlopes(3).values()),
                Arguments.of(203, 16, 1, 2, 2, 1, new double[] {0.8}));
    }

    @ParameterizedTest(name = "n={0} d={1} b={2} h={3} hkv={4} chunk={5}")
    @MethodSource("cases")
    void matchesRecurrenceForwardAndBackward(int n, int d, int b, int h, int hkv, int chunk, double[] lambdas) {
        long seed = 31L * n + d + 7L * chunk;
        Decay decay = Decay.perHead(lambdas);
        LinearAttention op = LinearAttention.withChunk(chunk, 2);
        check(seed, DataType.DOUBLE, b, h, hkv, n, d, decay, true, op, 1e-12);
        check(seed, DataType.FLOAT, b, h, hkv, n, d, decay, true, op, 1e-5);
    }

    @Test
    void decayGradientMatchesFiniteDifferencesOfTheRecurrence() {
        int n = 53;
        int d = 8;
        double[] lambdas = {0.7, 0.93, 0.999, 1.0};
        INDArray q = randn(11, DataType.DOUBLE, 2, 4, n, d);
        INDArray k = randn(12, DataType.DOUBLE, 2, 2, n, d);
        INDArray v = randn(13, DataType.DOUBLE, 2, 2, n, d);
        INDArray g = randn(14, DataType.DOUBLE, 2, 4, n, d);
        INDArray kvIn = randn(15, DataType.DOUBLE, 2, 4, d, d);
        INDArray dKvOut = randn(16, DataType.DOUBLE, 2, 4, d, d);
        LinearAttention op = LinearAttention.withChunk(16, 2).withDecayGradient();
        for (int h = 0; h < lambdas.length; h++) {
            double eps = 1e-6;
            double[] up = lambdas.clone();
            double[] down = lambdas.clone();
            up[h] -= eps;            // stay inside (0, 1] for lambda = 1: one-sided shift of both points
            down[h] -= 3 * eps;
            double numeric = (loss(q, k, v, g, kvIn, dKvOut, up) - loss(q, k, v, g, kvIn, dKvOut, down)) / (2 * eps);
            double centre = lambdas[h] - 2 * eps;
            // Compare at the midpoint of the two samples: evaluate the op's gradient there too.
            double[] mid = lambdas.clone();
            mid[h] = centre;
            LinearAttentionOutput outMid = op.forward(q, k, v, Decay.perHead(mid), true, kvIn);
            double analytic = op.backward(q, k, v, Decay.perHead(mid), true, kvIn, g, dKvOut, outMid.cache())
                    .dDecay().getDouble(h);
            double rel = Math.abs(analytic - numeric) / Math.max(1e-8, Math.abs(numeric));
            assertTrue(rel < 1e-6, "head " + h + ": analytic " + analytic + " numeric " + numeric + " rel " + rel);
        }
    }

    /** {@code sum(O * g) + <kvOut, dKvOut>} by the plain recurrence, whose gradients the op returns. */
    private static double loss(INDArray q, INDArray k, INDArray v, INDArray g, INDArray kvIn, INDArray dKvOut,
                               double[] lambdas) {
        ReferenceLinearAttention r = new ReferenceLinearAttention(q, k, v, g, kvIn, dKvOut, Decay.perHead(lambdas),
                true);
        return r.output().mul(g).sumNumber().doubleValue() + r.kvOut().mul(dKvOut).sumNumber().doubleValue();
    }

    @Test
    void nonCausalMatchesRightProduct() {
        LinearAttention op = LinearAttention.defaults();
        check(5, DataType.DOUBLE, 2, 4, 2, 113, 8, Decay.none(), false, op, 1e-12);
        check(6, DataType.FLOAT, 1, 2, 1, 7, 24, Decay.none(), false, op, 1e-5);
    }

    @Test
    void twoHalvesWithStatePassedEqualTheWholeSequence() {
        for (boolean causal : new boolean[] {true, false}) {
            int n = 203;
            int cut = 90;
            Decay decay = causal ? Decay.perHead(0.9, 0.99) : Decay.none();
            INDArray q = randn(1, DataType.DOUBLE, 2, 2, n, 16);
            INDArray k = randn(2, DataType.DOUBLE, 2, 1, n, 16);
            INDArray v = randn(3, DataType.DOUBLE, 2, 1, n, 16);
            INDArray g = randn(4, DataType.DOUBLE, 2, 2, n, 16);
            LinearAttention op = LinearAttention.withChunk(32, 2);
            LinearAttentionOutput whole = op.forward(q, k, v, decay, causal, null);
            LinearAttentionGradients wholeGrad = op.backward(q, k, v, decay, causal, null, g, null, whole.cache());

            LinearAttentionOutput first = op.forward(part(q, 0, cut), part(k, 0, cut), part(v, 0, cut), decay, causal,
                    null);
            LinearAttentionOutput second = op.forward(part(q, cut, n), part(k, cut, n), part(v, cut, n), decay, causal,
                    first.kvOut());
            LinearAttentionGradients secondGrad = op.backward(part(q, cut, n), part(k, cut, n), part(v, cut, n), decay,
                    causal, first.kvOut(), part(g, cut, n), null, second.cache());
            LinearAttentionGradients firstGrad = op.backward(part(q, 0, cut), part(k, 0, cut), part(v, 0, cut), decay,
                    causal, null, part(g, 0, cut), secondGrad.dKvIn(), first.cache());
            String ctx = "causal=" + causal;
            if (causal) {
                assertClose("O", Nd4j.concat(2, first.output(), second.output()), whole.output(), 1e-12, ctx);
                assertClose("kvOut", second.kvOut(), whole.kvOut(), 1e-12, ctx);
                assertClose("dQ", Nd4j.concat(2, firstGrad.dq(), secondGrad.dq()), wholeGrad.dq(), 1e-12, ctx);
                assertClose("dK", Nd4j.concat(2, firstGrad.dk(), secondGrad.dk()), wholeGrad.dk(), 1e-12, ctx);
                assertClose("dV", Nd4j.concat(2, firstGrad.dv(), secondGrad.dv()), wholeGrad.dv(), 1e-12, ctx);
                assertClose("dKvIn", firstGrad.dKvIn(), wholeGrad.dKvIn(), 1e-12, ctx);
            } else {
                // Non-causal halves see only their prefix state: the chain gives the prefix-sum form.
                assertClose("kvOut", second.kvOut(), whole.kvOut(), 1e-12, ctx);
            }
        }
    }

    @Test
    void missingCacheIsRebuiltWithTheSameResult() {
        INDArray q = randn(1, DataType.DOUBLE, 1, 2, 50, 8);
        INDArray k = randn(2, DataType.DOUBLE, 1, 2, 50, 8);
        INDArray v = randn(3, DataType.DOUBLE, 1, 2, 50, 8);
        INDArray g = randn(4, DataType.DOUBLE, 1, 2, 50, 8);
        INDArray kvIn = randn(5, DataType.DOUBLE, 1, 2, 8, 8);
        LinearAttention op = LinearAttention.withChunk(16, 1);
        Decay decay = Decay.of(0.9);
        LinearAttentionOutput out = op.forward(q, k, v, decay, true, kvIn);
        LinearAttentionGradients a = op.backward(q, k, v, decay, true, kvIn, g, null, out.cache());
        LinearAttentionGradients b = op.backward(q, k, v, decay, true, kvIn, g, null, null);
        assertClose("dQ", a.dq(), b.dq(), 0, "");
        assertClose("dKvIn", a.dKvIn(), b.dKvIn(), 0, "");
    }

    @Test
    void rejectsBadInputWithNamedExpectedAndActualValues() {
        LinearAttention op = LinearAttention.defaults();
        INDArray q = randn(1, DataType.FLOAT, 1, 4, 10, 8);
        INDArray k = randn(1, DataType.FLOAT, 1, 2, 10, 8);
        assertMessage(() -> Decay.of(1.5), "lambda must be in (0, 1], got 1.5");
        assertMessage(() -> Decay.of(0.0), "lambda must be in (0, 1], got 0.0");
        assertMessage(() -> Decay.perHead(0.9, Double.NaN), "got NaN for head 1");
        assertMessage(() -> LinearAttention.withChunk(0, 1), "chunk size must be >= 1, got 0");
        assertMessage(() -> op.forward(q, k, k, Decay.perHead(0.9, 0.9, 0.9), true, null),
                "3 decay values for 4 query heads");
        assertMessage(() -> op.forward(q, k, k, Decay.of(0.9), true, Nd4j.zeros(DataType.FLOAT, 1, 4, 8, 7)),
                "kvIn must have shape [1, 4, 8, 8], got [1, 4, 8, 7]");
        assertMessage(() -> op.forward(q, k, k, Decay.of(0.9), false, null), "needs causal attention");
        assertMessage(() -> op.forward(q, randn(1, DataType.FLOAT, 1, 3, 10, 8), randn(1, DataType.FLOAT, 1, 3, 10, 8),
                Decay.none(), true, null), "k has 3 heads, q has 4");
        assertMessage(() -> op.forward(q, randn(1, DataType.FLOAT, 1, 2, 9, 8), randn(1, DataType.FLOAT, 1, 2, 9, 8),
                Decay.none(), true, null), "k has 9 positions, q has 10");
        LinearAttentionOutput out = op.forward(q, k, k, Decay.none(), true, null);
        assertMessage(() -> LinearAttention.withChunk(3, 1).backward(q, k, k, Decay.none(), true, null, q, null,
                out.cache()), "the cache does not belong to this call");
        out.cache().release();
        out.cache().release();
        assertMessage(() -> op.backward(q, k, k, Decay.none(), true, null, q, null, out.cache()),
                "the cache was released");
    }

    @Test
    void documentsRestartTheStateAndPaddingAddsNothing() {
        // Random documents and padding, chunks of several sizes (cut again at every boundary of either sequence).
        Documents docs = Documents.random(3, 2, 203, 60);
        for (int chunk : new int[] {1, 16, 64, 256}) {
            LinearAttention op = LinearAttention.withChunk(chunk, 2);
            checkDocuments(21, DataType.DOUBLE, docs, Decay.perHead(0.9, 0.99, 1.0, 0.7), true, op, 1e-12);
            checkDocuments(22, DataType.FLOAT, docs, Decay.perHead(0.9, 0.99, 1.0, 0.7), true, op, 1e-5);
        }
        checkDocuments(23, DataType.DOUBLE, docs, Decay.none(), false, LinearAttention.defaults(), 1e-12);
    }

    @Test
    void aSegmentOfAPackedSequenceContinuesItsDocumentFromTheIncomingState() {
        int n = 203;
        Documents docs = Documents.random(5, 2, n, 70);
        Decay decay = Decay.perHead(0.9, 0.99);
        INDArray q = randn(1, DataType.DOUBLE, 2, 2, n, 8);
        INDArray k = randn(2, DataType.DOUBLE, 2, 1, n, 8);
        INDArray v = randn(3, DataType.DOUBLE, 2, 1, n, 8);
        INDArray g = randn(4, DataType.DOUBLE, 2, 2, n, 8);
        LinearAttention op = LinearAttention.withChunk(32, 2);
        for (int cut : new int[] {37, 90, 150}) {
            LinearAttentionOutput whole = op.forward(q, k, v, decay, true, null, docs);
            LinearAttentionGradients wholeGrad = op.backward(q, k, v, decay, true, null, g, null, whole.cache(), docs);
            LinearAttentionOutput first = op.forward(part(q, 0, cut), part(k, 0, cut), part(v, 0, cut), decay, true,
                    null, docs, 0);
            LinearAttentionOutput second = op.forward(part(q, cut, n), part(k, cut, n), part(v, cut, n), decay, true,
                    first.kvOut(), docs, cut);
            LinearAttentionGradients secondGrad = op.backward(part(q, cut, n), part(k, cut, n), part(v, cut, n), decay,
                    true, first.kvOut(), part(g, cut, n), null, second.cache(), docs, cut);
            LinearAttentionGradients firstGrad = op.backward(part(q, 0, cut), part(k, 0, cut), part(v, 0, cut), decay,
                    true, null, part(g, 0, cut), secondGrad.dKvIn(), first.cache(), docs, 0);
            String ctx = "cut " + cut;
            assertClose("O", Nd4j.concat(2, first.output(), second.output()), whole.output(), 1e-12, ctx);
            assertClose("kvOut", second.kvOut(), whole.kvOut(), 1e-12, ctx);
            assertClose("dQ", Nd4j.concat(2, firstGrad.dq(), secondGrad.dq()), wholeGrad.dq(), 1e-12, ctx);
            assertClose("dK", Nd4j.concat(2, firstGrad.dk(), secondGrad.dk()), wholeGrad.dk(), 1e-12, ctx);
            assertClose("dV", Nd4j.concat(2, firstGrad.dv(), secondGrad.dv()), wholeGrad.dv(), 1e-12, ctx);
        }
    }

    @Test
    void documentsOfTheWrongSizeAreRefused() {
        INDArray q = randn(1, DataType.DOUBLE, 2, 1, 16, 8);
        assertMessage(() -> LinearAttention.defaults().forward(q, q, q, Decay.of(0.9), true, null,
                Documents.packed(2, 15, 15)), "document ids must have shape [2, 16] (batch, global positions), got [2, 15]");
        assertMessage(() -> LinearAttention.defaults().forward(q, q, q, Decay.of(0.9), true, null,
                Documents.packed(2, 20, 20), 8), "document ids must cover 2 sequences and positions 8..23 of this "
                + "call, got [2, 20]");
    }

    private static void checkDocuments(long seed, DataType type, Documents docs, Decay decay, boolean causal,
                                       LinearAttention op, double tol) {
        check(seed, type, docs.batch(), 4, 2, docs.length(), 8, decay, causal, op, tol, docs);
    }

    private static void assertMessage(Runnable call, String expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(e.getMessage().contains(expected), "message '" + e.getMessage() + "' lacks '" + expected + "'");
    }

    private static void check(long seed, DataType type, int b, int h, int hkv, int n, int d, Decay decay,
                              boolean causal, LinearAttention op, double tol) {
        check(seed, type, b, h, hkv, n, d, decay, causal, op, tol, null);
    }

    private static void check(long seed, DataType type, int b, int h, int hkv, int n, int d, Decay decay,
                              boolean causal, LinearAttention op, double tol, Documents docs) {
        INDArray q = randn(seed, type, b, h, n, d);
        INDArray k = randn(seed + 1, type, b, hkv, n, d);
        INDArray v = randn(seed + 2, type, b, hkv, n, d);
        INDArray g = randn(seed + 3, type, b, h, n, d);
        INDArray kvIn = randn(seed + 4, type, b, h, d, d);
        INDArray dKvOut = randn(seed + 5, type, b, h, d, d);
        ReferenceLinearAttention ref = new ReferenceLinearAttention(q, k, v, g, kvIn, dKvOut, decay, causal, docs, 0);
        LinearAttentionOutput out = op.forward(q, k, v, decay, causal, kvIn, docs);
        LinearAttentionGradients grad = op.backward(q, k, v, decay, causal, kvIn, g, dKvOut, out.cache(), docs);
        String ctx = "seed " + seed + ", " + type + ", " + decay + ", causal=" + causal + ", " + op
                + (docs == null ? "" : ", " + docs);
        assertClose("O", out.output(), ref.output(), tol, ctx);
        assertClose("kvOut", out.kvOut(), ref.kvOut(), tol, ctx);
        assertClose("dQ", grad.dq(), ref.dq(), tol, ctx);
        assertClose("dK", grad.dk(), ref.dk(), tol, ctx);
        assertClose("dV", grad.dv(), ref.dv(), tol, ctx);
        assertClose("dKvIn", grad.dKvIn(), ref.dKvIn(), tol, ctx);
    }

    static INDArray part(INDArray a, int from, int to) {
        return a.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, to), NDArrayIndex.all());
    }

    static INDArray randn(long seed, DataType type, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(seed).nextGaussian(shape).castTo(type);
    }

    static void assertClose(String what, INDArray actual, INDArray expected, double tol, String ctx) {
        double[] a = actual.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        double[] e = expected.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        double diff = 0;
        double ref = 0;
        for (int i = 0; i < e.length; i++) {
            diff = Math.max(diff, Math.abs(a[i] - e[i]));
            ref = Math.max(ref, Math.abs(e[i]));
            if (Double.isNaN(a[i])) {
                fail(what + " has NaN (" + ctx + ")");
            }
        }
        double err = ref == 0 ? diff : diff / ref;
        if (!(err <= tol)) {
            fail(what + ": relative error " + err + " > " + tol + " (" + ctx + ")");
        }
    }
}
