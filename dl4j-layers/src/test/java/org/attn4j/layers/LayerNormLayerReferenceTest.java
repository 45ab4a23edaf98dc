package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertIdentical;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.MaskState;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.common.primitives.Pair;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * {@link LayerNormLayer} computes its definition per (example, step), computed by hand in float64, and never mixes
 * steps: a step's output ignores the other steps, and shards of a sequence give the shards of the output and input
 * gradient and parameter gradients that sum to the whole sequence's, which is what sequence parallelism relies on.
 */
class LayerNormLayerReferenceTest {

    private static final int WIDTH = 5;
    private static final int MB = 3;
    private static final int N = 7;

    /** A norm setting. */
    record Case(boolean rms, RNNFormat format) {
        @Override
        public String toString() {
            return (rms ? "RMSNorm " : "LayerNorm ") + format;
        }
    }

    static Stream<Arguments> cases() {
        return Stream.of(new Case(false, RNNFormat.NCW), new Case(false, RNNFormat.NWC),
                new Case(true, RNNFormat.NCW), new Case(true, RNNFormat.NWC)).map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void matchesHandComputationPerStepWithMask(Case c) {
        long seed = SEED + 41 + c.toString().hashCode();
        Random rnd = new Random(seed);
        double eps = 1e-3;
        MultiLayerNetwork net = LayerNormNetworks.alone(LayerNormNetworks.norm(WIDTH, c.rms(), c.format()).eps(eps)
                .build(), DataType.DOUBLE, seed);
        LayerNormNetworks.randomiseNorms(rnd, net, "0_");
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), MB, WIDTH, N).muli(3).addi(1);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.DOUBLE, MB, N);

        INDArray actual = net.output(x, false, mask, null);

        double[] g = NaiveMath.vector(net.getParam("0_g"));
        double[] b = c.rms() ? new double[WIDTH] : NaiveMath.vector(net.getParam("0_b"));
        double[][][] expected = new double[MB][N][];
        for (int i = 0; i < MB; i++) {
            double[][] steps = NaiveMath.steps(x, c.format(), i);
            for (int t = 0; t < N; t++) {
                expected[i][t] = mask.getDouble(i, t) == 0 ? new double[WIDTH] : norm(steps[t], g, b, eps, c.rms());
            }
        }
        NaiveMath.assertMatches(expected, actual, c.format(), 1e-12, c + ", seed " + seed);
    }

    /** A new norm (gain 1, bias 0) standardises every step: mean 0 and biased variance {@code v / (v + eps)}. */
    @Test
    void standardisesEveryStepToMeanZeroAndVarianceOne() {
        long seed = SEED + 42;
        double eps = LayerNormLayer.DEFAULT_EPS;
        MultiLayerNetwork net = LayerNormNetworks.alone(new LayerNormLayer.Builder(WIDTH).build(), DataType.DOUBLE,
                seed);
        INDArray x = LayerTestSupport.features(new Random(seed), DataType.DOUBLE, RNNFormat.NCW, MB, WIDTH, N)
                .muli(4).subi(2);

        INDArray y = net.output(x);

        for (int i = 0; i < MB; i++) {
            double[][] in = NaiveMath.steps(x, RNNFormat.NCW, i);
            double[][] out = NaiveMath.steps(y, RNNFormat.NCW, i);
            for (int t = 0; t < N; t++) {
                double v = variance(in[t]);
                String where = "example " + i + ", step " + t + ", seed " + seed;
                assertEquals(0.0, mean(out[t]), 1e-12, "mean at " + where);
                assertEquals(v / (v + eps), variance(out[t]), 1e-12, "variance at " + where);
                assertEquals(1.0, variance(out[t]), 1e-3, "variance at " + where);
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void outputAtOneStepIgnoresEveryOtherStep(Case c) {
        long seed = SEED + 43 + c.toString().hashCode();
        Random rnd = new Random(seed);
        MultiLayerNetwork net = LayerNormNetworks.alone(LayerNormNetworks.norm(WIDTH, c.rms(), c.format()).build(),
                DataType.DOUBLE, seed);
        LayerNormNetworks.randomiseNorms(rnd, net, "0_");
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), MB, WIDTH, N);
        int t = 3;
        INDArray changed = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), MB, WIDTH, N).muli(5);
        steps(changed, c.format(), t, t + 1).assign(steps(x, c.format(), t, t + 1));

        INDArray before = steps(net.output(x), c.format(), t, t + 1);
        INDArray after = steps(net.output(changed), c.format(), t, t + 1);

        assertIdentical(before, after, "output at step " + t + " for " + c + ", seed " + seed);
    }

    /**
     * Steps [0, 3) and [3, 7) on their own, as two sequence-parallel workers hold them, give the whole sequence's
     * output and dL/dx on their steps, and parameter gradients that sum to the whole sequence's.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void shardsOfTheSequenceGiveShardsOfOutputAndGradients(Case c) {
        long seed = SEED + 44 + c.toString().hashCode();
        Random rnd = new Random(seed);
        MultiLayerNetwork net = LayerNormNetworks.alone(LayerNormNetworks.norm(WIDTH, c.rms(), c.format()).build(),
                DataType.DOUBLE, seed);
        LayerNormNetworks.randomiseNorms(rnd, net, "0_");
        net.initGradientsView();
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), MB, WIDTH, N);
        INDArray dy = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), MB, WIDTH, N);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.DOUBLE, MB, N);

        Pass whole = pass(net.getLayer(0), x, mask, dy);
        Pass left = pass(net.getLayer(0), steps(x, c.format(), 0, 3), mask.get(NDArrayIndex.all(),
                NDArrayIndex.interval(0, 3)), steps(dy, c.format(), 0, 3));
        Pass right = pass(net.getLayer(0), steps(x, c.format(), 3, N), mask.get(NDArrayIndex.all(),
                NDArrayIndex.interval(3, N)), steps(dy, c.format(), 3, N));

        String what = c + ", seed " + seed;
        int stepAxis = c.format() == RNNFormat.NCW ? 2 : 1;
        assertIdentical(whole.y(), Nd4j.concat(stepAxis, left.y(), right.y()), "output of " + what);
        assertIdentical(whole.dx(), Nd4j.concat(stepAxis, left.dx(), right.dx()), "dL/dx of " + what);
        double[] summed = NaiveMath.vector(left.dParams().add(right.dParams()));
        double[] expected = NaiveMath.vector(whole.dParams());
        for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], summed[i], 1e-12, "parameter gradient " + i + " of " + what);
        }
    }

    /** The feature mask reaches the next layer as it came. */
    @Test
    void passesTheFeatureMaskOn() {
        MultiLayerNetwork net = LayerNormNetworks.alone(new LayerNormLayer.Builder(WIDTH).build(), DataType.DOUBLE,
                SEED);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.DOUBLE, MB, N);

        Pair<INDArray, MaskState> out = net.getLayer(0).feedForwardMaskArray(mask, MaskState.Active, MB);

        assertSame(mask, out.getFirst());
        assertEquals(MaskState.Active, out.getSecond());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void agreesInFloat32WithFloat64(Case c) {
        long seed = SEED + 45 + c.toString().hashCode();
        MultiLayerNetwork doubles = LayerNormNetworks.alone(LayerNormNetworks.norm(WIDTH, c.rms(), c.format())
                .build(), DataType.DOUBLE, seed);
        LayerNormNetworks.randomiseNorms(new Random(seed), doubles, "0_");
        MultiLayerNetwork floats = LayerNormNetworks.alone(LayerNormNetworks.norm(WIDTH, c.rms(), c.format())
                .build(), DataType.FLOAT, seed);
        floats.setParams(doubles.params().castTo(DataType.FLOAT));
        INDArray x = LayerTestSupport.features(new Random(seed + 1), DataType.DOUBLE, c.format(), MB, WIDTH, N);

        INDArray expected = doubles.output(x);
        INDArray actual = floats.output(x.castTo(DataType.FLOAT));

        assertEquals(DataType.FLOAT, actual.dataType());
        double diff = expected.sub(actual.castTo(DataType.DOUBLE)).amaxNumber().doubleValue();
        assertEquals(0.0, diff, 1e-5, "largest float32 difference for " + c + ", seed " + seed);
    }

    /** One forward and backward of the layer alone: its output, dL/dx and a copy of its parameter gradients. */
    private record Pass(INDArray y, INDArray dx, INDArray dParams) {
    }

    private static Pass pass(Layer layer, INDArray x, INDArray mask, INDArray dy) {
        LayerWorkspaceMgr mgr = LayerWorkspaceMgr.noWorkspaces();
        layer.setInput(x.dup(), mgr);
        layer.setMaskArray(mask.dup());
        INDArray y = layer.activate(true, mgr).dup();
        Pair<Gradient, INDArray> g = layer.backpropGradient(dy.dup(), mgr);
        return new Pass(y, g.getSecond().dup(), layer.getGradientsViewArray().dup());
    }

    /** Steps {@code [from, to)} of {@code a} in {@code format}, a view. */
    private static INDArray steps(INDArray a, RNNFormat format, int from, int to) {
        return format == RNNFormat.NCW
                ? a.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, to))
                : a.get(NDArrayIndex.all(), NDArrayIndex.interval(from, to), NDArrayIndex.all());
    }

    /** {@code g . (x - mean) / sqrt(var + eps) + b}, or {@code g . x / sqrt(mean(x^2) + eps)}, by hand. */
    private static double[] norm(double[] x, double[] g, double[] b, double eps, boolean rms) {
        double mean = rms ? 0 : mean(x);
        double square = 0;
        for (double v : x) {
            square += (v - mean) * (v - mean);
        }
        double inv = 1 / Math.sqrt(square / x.length + eps);
        double[] y = new double[x.length];
        for (int f = 0; f < x.length; f++) {
            y[f] = g[f] * (x[f] - mean) * inv + b[f];
        }
        return y;
    }

    private static double mean(double[] x) {
        double sum = 0;
        for (double v : x) {
            sum += v;
        }
        return sum / x.length;
    }

    /** Biased: divided by the count. */
    private static double variance(double[] x) {
        double mean = mean(x);
        double sum = 0;
        for (double v : x) {
            sum += (v - mean) * (v - mean);
        }
        return sum / x.length;
    }
}
