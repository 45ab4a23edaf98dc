package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;

import java.util.Arrays;
import java.util.Random;
import java.util.stream.Stream;

import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.testing.ReferenceLinearAttention;
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

/**
 * The layer's output equals the plain recurrence {@code kv_s = lambda kv_(s-1) + k_s v_s^T}, {@code o_s = q_s^T kv_s}
 * (or {@code o_s = q_s^T sum_j k_j v_j^T} when not causal), RMS norm with gain and output projection, computed
 * naively in float64 from the same weights, with the gain and decay logits moved away from their initial values.
 */
class LinearAttentionLayerReferenceTest {

    private static final int N_IN = 5;
    private static final int MB = 3;
    private static final int N = 7;

    /** A layer setting and the precision to run the network in; {@code decay} null = TransNormerLLM slopes. */
    record Case(String name, DataType dataType, RNNFormat format, boolean masked, int nOut, int nHeads,
                int nKvHeads, int headSize, boolean causal, double[] decay, boolean learn, int chunk,
                Activation activation) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Arguments> cases() {
        return Stream.of(
                new Case("causal GQA masked slopes", DataType.DOUBLE, RNNFormat.NCW, true, 8, 4, 2, 0, true, null,
                        false, 0, Activation.IDENTITY),
                new Case("causal MHA learned in chunks of 3 NWC", DataType.DOUBLE, RNNFormat.NWC, true, 6, 3, 3, 0,
                        true, null, true, 3, Activation.IDENTITY),
                new Case("non-causal MHA masked", DataType.DOUBLE, RNNFormat.NCW, true, 6, 2, 2, 0, false, null,
                        false, 0, Activation.IDENTITY),
                new Case("non-causal MQA unmasked NWC", DataType.DOUBLE, RNNFormat.NWC, false, 8, 4, 1, 0, false,
                        null, false, 0, Activation.IDENTITY),
                new Case("per-head decay, headSize set, tanh", DataType.DOUBLE, RNNFormat.NCW, true, 5, 2, 1, 3, true,
                        new double[] {0.95, 0.5}, false, 2, Activation.TANH),
                new Case("one decay for all heads unmasked", DataType.DOUBLE, RNNFormat.NCW, false, 4, 2, 2, 0, true,
                        new double[] {0.7}, false, 4, Activation.IDENTITY),
                new Case("float32 causal GQA masked learned NWC", DataType.FLOAT, RNNFormat.NWC, true, 8, 4, 2, 0,
                        true, null, true, 3, Activation.IDENTITY))
                .map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void matchesNaiveFloat64Recurrence(Case c) {
        long seed = SEED + c.name().hashCode();
        Random rnd = new Random(seed);
        LinearAttentionLayer.Builder b = LayerTestSupport.linear(N_IN, c.nOut(), c.nHeads()).nKvHeads(c.nKvHeads())
                .headSize(c.headSize()).causal(c.causal()).learnDecay(c.learn()).chunkSize(c.chunk())
                .dataFormat(c.format()).activation(c.activation());
        if (c.decay() != null) {
            b.decay(c.decay());
        }
        LinearAttentionLayer layer = b.build();
        MultiLayerNetwork net = LayerTestSupport.alone(layer, c.dataType(), seed);
        perturb(net.getParam("0_g"), rnd, 1.0, 0.5);
        if (c.learn()) {
            perturb(net.getParam("0_theta"), rnd, 0.0, 2.0);
        }
        INDArray x = LayerTestSupport.features(rnd, c.dataType(), c.format(), MB, N_IN, N);
        INDArray mask = c.masked() ? LayerTestSupport.endPaddingMask(c.dataType(), MB, N) : null;

        INDArray actual = net.output(x, false, mask, null);
        INDArray training = net.output(x, true, mask, null);
        double[][][] expected = naive(net, layer, x, mask, c);

        double tol = c.dataType() == DataType.DOUBLE ? 1e-10 : 5e-5;
        NaiveMath.assertMatches(expected, actual, c.format(), tol, c + ", seed " + seed);
        LayerTestSupport.assertIdentical(actual, training, "training-mode output for " + c + ", seed " + seed);
    }

    private static void perturb(INDArray param, Random rnd, double mean, double spread) {
        for (int i = 0; i < param.length(); i++) {
            param.putScalar(0, i, mean + spread * rnd.nextGaussian());
        }
    }

    /** The layer by its definition, in float64 (the recurrence: {@link ReferenceLinearAttention}): out[b][t][f]. */
    private static double[][][] naive(MultiLayerNetwork net, LinearAttentionLayer layer, INDArray x, INDArray mask,
                                      Case c) {
        NaiveMath.Projections p = NaiveMath.Projections.of(net);
        double[] gain = NaiveMath.vector(net.getParam("0_g"));
        int hs = layer.effectiveHeadSize();
        int width = c.nHeads() * hs;
        double[][][] q = new double[MB][][];
        double[][][] k = new double[MB][][];
        double[][][] v = new double[MB][][];
        for (int b = 0; b < MB; b++) {
            double[][] xs = NaiveMath.steps(x, c.format(), b);
            q[b] = NaiveMath.affine(xs, p.wq(), p.bq());
            k[b] = NaiveMath.affine(xs, p.wk(), p.bk());
            v[b] = NaiveMath.affine(xs, p.wv(), p.bv());
            for (int t = 0; t < N; t++) {
                if (!real(mask, b, t)) {
                    Arrays.fill(k[b][t], 0.0);
                    Arrays.fill(v[b][t], 0.0);
                }
            }
        }
        INDArray o = new ReferenceLinearAttention(NaiveMath.heads(q, c.nHeads(), hs),
                NaiveMath.heads(k, c.nKvHeads(), hs), NaiveMath.heads(v, c.nKvHeads(), hs),
                Decay.perHead(lambdas(net, c)), c.causal()).output();
        double[][][] out = new double[MB][N][c.nOut()];
        for (int b = 0; b < MB; b++) {
            double[][] merged = NaiveMath.merged(o, b);
            double[][] normed = new double[N][width];
            for (int t = 0; t < N; t++) {
                double sq = 0;
                for (int f = 0; f < width; f++) {
                    sq += merged[t][f] * merged[t][f];
                }
                double rms = Math.sqrt(sq / width + 1e-6);
                for (int f = 0; f < width; f++) {
                    normed[t][f] = gain[f] * merged[t][f] / rms;
                }
            }
            double[][] z = NaiveMath.affine(normed, p.wo(), p.bo());
            for (int t = 0; t < N; t++) {
                for (int f = 0; f < c.nOut(); f++) {
                    double y = c.activation() == Activation.TANH ? Math.tanh(z[t][f]) : z[t][f];
                    out[b][t][f] = real(mask, b, t) ? y : 0;
                }
            }
        }
        return out;
    }

    /** Lambda per query head: sigmoid(theta) when learned, the configured values, or TransNormerLLM's slopes. */
    private static double[] lambdas(MultiLayerNetwork net, Case c) {
        double[] lambda = new double[c.nHeads()];
        double[] theta = c.learn() ? NaiveMath.vector(net.getParam("0_theta")) : null;
        for (int h = 0; h < c.nHeads(); h++) {
            if (theta != null) {
                lambda[h] = 1 / (1 + Math.exp(-theta[h]));
            } else if (c.decay() != null) {
                lambda[h] = c.decay()[c.decay().length == 1 ? 0 : h];
            } else {
                // TransNormerLLM: head h of H decays with exp(-slope), slope = 2^(-8 (h + 1) / H)
                lambda[h] = Math.exp(-1.0 / Math.pow(2.0, 8.0 * (h + 1) / c.nHeads()));
            }
        }
        return lambda;
    }

    private static boolean real(INDArray mask, int b, int t) {
        return mask == null || mask.getDouble(b, t) != 0;
    }
}
