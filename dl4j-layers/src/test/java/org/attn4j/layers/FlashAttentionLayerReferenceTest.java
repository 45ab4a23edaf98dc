package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;

import java.util.Random;
import java.util.stream.Stream;

import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.testing.ReferenceAttention;
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

    /** Softmax attention by the definition ({@link ReferenceAttention}) between the projections, in float64. */
    private static double[][][] naive(MultiLayerNetwork net, FlashAttentionLayer layer, INDArray x, INDArray mask,
                                      Case c) {
        NaiveMath.Projections p = NaiveMath.Projections.of(net);
        int hs = layer.effectiveHeadSize();
        double scale = c.scale() != null ? c.scale() : 1.0 / Math.sqrt(hs);
        double[][][] q = new double[MB][][];
        double[][][] k = new double[MB][][];
        double[][][] v = new double[MB][][];
        for (int b = 0; b < MB; b++) {
            double[][] xs = NaiveMath.steps(x, c.format(), b);
            q[b] = NaiveMath.affine(xs, p.wq(), p.bq());
            k[b] = NaiveMath.affine(xs, p.wk(), p.bk());
            v[b] = NaiveMath.affine(xs, p.wv(), p.bv());
        }
        AttentionMask rules = AttentionMask.builder().causal(c.causal()).window(c.window()).keyPadding(mask).build();
        INDArray o = new ReferenceAttention(NaiveMath.heads(q, c.nHeads(), hs), NaiveMath.heads(k, c.nKvHeads(), hs),
                NaiveMath.heads(v, c.nKvHeads(), hs), null, rules, scale).output();
        double[][][] out = new double[MB][N][c.nOut()];
        for (int b = 0; b < MB; b++) {
            double[][] z = NaiveMath.affine(NaiveMath.merged(o, b), p.wo(), p.bo());
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
}
