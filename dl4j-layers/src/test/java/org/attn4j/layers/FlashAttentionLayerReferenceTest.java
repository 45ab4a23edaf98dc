package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;

import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

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
        MultiLayerNetwork net = LayerTestSupport.alone(layer, c.dataType(), seed);
        INDArray x = LayerTestSupport.features(rnd, c.dataType(), c.format(), MB, N_IN, N);
        INDArray mask = c.masked() ? LayerTestSupport.endPaddingMask(c.dataType(), MB, N) : null;

        INDArray actual = net.output(x, false, mask, null);
        double[][][] expected = naive(net, layer, x, mask, c);

        double tol = c.dataType() == DataType.DOUBLE ? 1e-10 : 2e-5;
        NaiveMath.assertMatches(expected, actual, c.format(), tol, c + ", seed " + seed);
    }

    /** Softmax attention by the definition, in float64: out[b][t][f]. */
    private static double[][][] naive(MultiLayerNetwork net, FlashAttentionLayer layer, INDArray x, INDArray mask,
                                      Case c) {
        NaiveMath.Projections p = NaiveMath.Projections.of(net);
        int hs = layer.effectiveHeadSize();
        int group = c.nHeads() / c.nKvHeads();
        double scale = c.scale() != null ? c.scale() : 1.0 / Math.sqrt(hs);
        double[][][] out = new double[MB][N][c.nOut()];
        for (int b = 0; b < MB; b++) {
            double[][] xs = NaiveMath.steps(x, c.format(), b);
            double[][] q = NaiveMath.affine(xs, p.wq(), p.bq());
            double[][] k = NaiveMath.affine(xs, p.wk(), p.bk());
            double[][] v = NaiveMath.affine(xs, p.wv(), p.bv());
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
            double[][] z = NaiveMath.affine(merged, p.wo(), p.bo());
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
}
