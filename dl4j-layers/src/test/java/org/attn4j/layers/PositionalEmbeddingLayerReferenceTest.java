package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.PositionalNetworks.positional;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The layer's output and gradients equal a hand computation in float64: {@code out[b][t] = x[b][t] + m[b][t] P[t]},
 * {@code dL/dx = eps}, {@code dL/dP[t] = sum_b m[b][t] eps[b][t]} for the steps {@code t < N} and 0 for the other
 * rows, with {@code P[p][f] = 100 p + f} so that a wrong row shows at once.
 */
class PositionalEmbeddingLayerReferenceTest {

    private static final int WIDTH = 3;
    private static final int MB = 3;
    private static final int N = 5;
    private static final int MAX_LENGTH = 8;

    static Stream<Arguments> cases() {
        return Stream.of(Arguments.of(RNNFormat.NCW, false), Arguments.of(RNNFormat.NCW, true),
                Arguments.of(RNNFormat.NWC, false), Arguments.of(RNNFormat.NWC, true));
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0} masked={1}")
    @MethodSource("cases")
    void addsTheRowOfEachStepsPositionAndSendsTheBatchSumOfEpsilonThere(RNNFormat format, boolean masked) {
        long seed = SEED + format.ordinal() + (masked ? 10 : 0);
        Random rnd = new Random(seed);
        MultiLayerNetwork net = PositionalNetworks.alone(positional(WIDTH, MAX_LENGTH).dataFormat(format).build(),
                DataType.DOUBLE, seed);
        net.getParam("0_P").assign(table());
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, format, MB, WIDTH, N);
        INDArray eps = LayerTestSupport.features(rnd, DataType.DOUBLE, format, MB, WIDTH, N);
        INDArray mask = masked ? LayerTestSupport.endPaddingMask(DataType.DOUBLE, MB, N) : null;
        String what = format + (masked ? " masked" : "") + ", seed " + seed;

        INDArray inference = net.output(x, false, mask, null);
        PositionalNetworks.Pass pass = PositionalNetworks.Pass.of(net, x, mask, eps);

        double[][][] expected = new double[MB][N][WIDTH];
        double[][] expectedDp = new double[MAX_LENGTH][WIDTH];
        for (int b = 0; b < MB; b++) {
            for (int t = 0; t < N; t++) {
                double m = mask == null ? 1 : mask.getDouble(b, t);
                for (int f = 0; f < WIDTH; f++) {
                    expected[b][t][f] = NaiveMath.at(x, format, b, t, f) + m * (100.0 * t + f);
                    expectedDp[t][f] += m * NaiveMath.at(eps, format, b, t, f);
                }
            }
        }
        NaiveMath.assertMatches(expected, inference, format, 1e-12, "inference output, " + what);
        NaiveMath.assertMatches(expected, pass.output(), format, 1e-12, "training output, " + what);
        LayerTestSupport.assertIdentical(eps, pass.inputGradient(), "dL/dx, " + what);
        for (int p = 0; p < MAX_LENGTH; p++) {
            for (int f = 0; f < WIDTH; f++) {
                assertEquals(expectedDp[p][f], pass.tableGradient().getDouble(p, f), 1e-12,
                        "dL/dP[" + p + ", " + f + "], " + what);
            }
        }
    }

    /** {@code P[p][f] = 100 p + f}. */
    static INDArray table() {
        INDArray p = Nd4j.create(DataType.DOUBLE, MAX_LENGTH, WIDTH);
        for (int r = 0; r < MAX_LENGTH; r++) {
            for (int f = 0; f < WIDTH; f++) {
                p.putScalar(r, f, 100.0 * r + f);
            }
        }
        return p;
    }
}
