package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/** The layer's output equals plain softmax attention computed naively in float64 from the same weights. */
class FlashAttentionLayerReferenceTest {

    private static final int N_IN = 5;
    private static final int MB = 3;
    private static final int N = 7;

    /** A layer setting and the precision to run the network in. */
    record Case(String name, DataType dataType, RNNFormat format, boolean masked, int nOut, int nHeads,
                int nKvHeads, int headSize, boolean causal, int window, Double scale, Activation activation) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Arguments> cases() {
        return Stream.of(
                new Case("causal GQA masked", DataType.DOUBLE, RNNFormat.NCW, true, 8, 4, 2, 0, true, 0, null,
                        Activation.IDENTITY),
                new Case("full MHA unmasked", DataType.DOUBLE, RNNFormat.NCW, false, 6, 3, 3, 0, false, 0, null,
                        Activation.IDENTITY),
                new Case("full MHA masked", DataType.DOUBLE, RNNFormat.NCW, true, 6, 2, 2, 0, false, 0, null,
                        Activation.IDENTITY),
                new Case("MQA window masked NWC", DataType.DOUBLE, RNNFormat.NWC, true, 8, 4, 1, 0, true, 3, null,
                        Activation.IDENTITY),
                new Case("non-causal window", DataType.DOUBLE, RNNFormat.NCW, false, 4, 2, 1, 0, false, 2, null,
                        Activation.IDENTITY),
                new Case("headSize and scale set, tanh", DataType.DOUBLE, RNNFormat.NCW, true, 5, 2, 1, 3, true, 0,
                        0.7, Activation.TANH),
                new Case("float32 causal GQA masked NWC", DataType.FLOAT, RNNFormat.NWC, true, 8, 4, 2, 0, true, 0,
                        null, Activation.IDENTITY))
                .map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void matchesNaiveFloat64Attention(Case c) {
        long seed = SEED + c.name().hashCode();
        Random rnd = new Random(seed);
        FlashAttentionLayer.Builder b = LayerTestSupport.attention(N_IN, c.nOut(), c.nHeads()).nKvHeads(c.nKvHeads())
                .headSize(c.headSize()).causal(c.causal()).slidingWindow(c.window()).dataFormat(c.format())
                .activation(c.activation());
        if (c.scale() != null) {
            b.scale(c.scale());
        }
        FlashAttentionLayer layer = b.build();
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().seed(seed).dataType(c.dataType())
                .updater(new NoOp()).weightInit(WeightInit.XAVIER).biasInit(0.1).list().layer(layer).build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        INDArray x = LayerTestSupport.features(rnd, c.dataType(), c.format(), MB, N_IN, N);
        INDArray mask = c.masked() ? LayerTestSupport.endPaddingMask(c.dataType(), MB, N) : null;

        INDArray actual = net.output(x, false, mask, null);
        double[][][] expected = naive(net, layer, x, mask, c);

        long[] shape = c.format() == RNNFormat.NCW ? new long[] {MB, c.nOut(), N} : new long[] {MB, N, c.nOut()};
        assertArrayEquals(shape, actual.shape(), "output shape for " + c);
        double tol = c.dataType() == DataType.DOUBLE ? 1e-10 : 2e-5;
        for (int i = 0; i < MB; i++) {
            for (int t = 0; t < N; t++) {
                for (int f = 0; f < c.nOut(); f++) {
                    double a = c.format() == RNNFormat.NCW ? actual.getDouble(i, f, t) : actual.getDouble(i, t, f);
                    assertEquals(expected[i][t][f], a, tol, "output [b=" + i + ", t=" + t + ", f=" + f + "] for "
                            + c + ", seed " + seed);
                }
            }
        }
    }

    /** Softmax attention by the definition, in float64: out[b][t][f]. */
    private static double[][][] naive(MultiLayerNetwork net, FlashAttentionLayer layer, INDArray x, INDArray mask,
                                      Case c) {
        double[][] wq = matrix(net.getParam("0_Wq"));
        double[] bq = vector(net.getParam("0_bq"));
        double[][] wk = matrix(net.getParam("0_Wk"));
        double[] bk = vector(net.getParam("0_bk"));
        double[][] wv = matrix(net.getParam("0_Wv"));
        double[] bv = vector(net.getParam("0_bv"));
        double[][] wo = matrix(net.getParam("0_Wo"));
        double[] bo = vector(net.getParam("0_bo"));
        int hs = layer.effectiveHeadSize();
        int group = c.nHeads() / c.nKvHeads();
        double scale = c.scale() != null ? c.scale() : 1.0 / Math.sqrt(hs);
        double[][][] out = new double[MB][N][c.nOut()];
        for (int b = 0; b < MB; b++) {
            double[][] xs = new double[N][N_IN];
            for (int t = 0; t < N; t++) {
                for (int f = 0; f < N_IN; f++) {
                    xs[t][f] = c.format() == RNNFormat.NCW ? x.getDouble(b, f, t) : x.getDouble(b, t, f);
                }
            }
            double[][] q = affine(xs, wq, bq);
            double[][] k = affine(xs, wk, bk);
            double[][] v = affine(xs, wv, bv);
            double[][] merged = new double[N][c.nHeads() * hs];
            for (int h = 0; h < c.nHeads(); h++) {
                int g = h / group;
                for (int i = 0; i < N; i++) {
                    double[] s = new double[N];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < N; j++) {
                        s[j] = Double.NEGATIVE_INFINITY;
                        if (visible(c, mask, b, i, j)) {
                            double dot = 0;
                            for (int d = 0; d < hs; d++) {
                                dot += q[i][h * hs + d] * k[j][g * hs + d];
                            }
                            s[j] = scale * dot;
                            max = Math.max(max, s[j]);
                        }
                    }
                    double sum = 0;
                    for (int j = 0; j < N; j++) {
                        s[j] = s[j] == Double.NEGATIVE_INFINITY ? 0 : Math.exp(s[j] - max);
                        sum += s[j];
                    }
                    for (int j = 0; j < N && sum > 0; j++) {
                        for (int d = 0; d < hs; d++) {
                            merged[i][h * hs + d] += s[j] / sum * v[j][g * hs + d];
                        }
                    }
                }
            }
            double[][] z = affine(merged, wo, bo);
            for (int t = 0; t < N; t++) {
                boolean real = mask == null || mask.getDouble(b, t) != 0;
                for (int f = 0; f < c.nOut(); f++) {
                    double y = c.activation() == Activation.TANH ? Math.tanh(z[t][f]) : z[t][f];
                    out[b][t][f] = real ? y : 0;
                }
            }
        }
        return out;
    }

    private static boolean visible(Case c, INDArray mask, int b, int i, int j) {
        if (mask != null && mask.getDouble(b, j) == 0) {
            return false;
        }
        if (c.causal() && j > i) {
            return false;
        }
        return c.window() == 0 || (c.causal() ? i - j < c.window() : Math.abs(i - j) < c.window());
    }

    private static double[][] affine(double[][] in, double[][] w, double[] bias) {
        double[][] out = new double[in.length][bias.length];
        for (int r = 0; r < in.length; r++) {
            for (int o = 0; o < bias.length; o++) {
                double acc = bias[o];
                for (int i = 0; i < w.length; i++) {
                    acc += in[r][i] * w[i][o];
                }
                out[r][o] = acc;
            }
        }
        return out;
    }

    private static double[][] matrix(INDArray a) {
        return a.castTo(DataType.DOUBLE).toDoubleMatrix();
    }

    private static double[] vector(INDArray a) {
        return a.castTo(DataType.DOUBLE).toDoubleVector();
    }
}
