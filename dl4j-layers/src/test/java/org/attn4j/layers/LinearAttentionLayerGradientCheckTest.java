package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.gradientcheck.GradientCheckUtil;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/** DL4J numerical gradient checks of {@link LinearAttentionLayer} in double precision (STYLE.md, "Tests"). */
class LinearAttentionLayerGradientCheckTest {

    private static final double EPS = 1e-6;
    private static final double MAX_REL_ERROR = 1e-3;
    private static final double MIN_ABS_ERROR = 1e-8;
    private static final int N_IN = 3;
    private static final int N = 6;

    /** One layer setting; {@code chunk} 0 = the op's default (one chunk here), {@code decay} null = slopes. */
    record Case(int minibatch, boolean masked, boolean causal, int nHeads, int nKvHeads, boolean learn, int chunk,
                double[] decay, RNNFormat format) {
        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + (causal ? " causal" : " full") + " H=" + nHeads
                    + " Hkv=" + nKvHeads + (learn ? " learned" : "") + (chunk > 0 ? " chunk=" + chunk : "")
                    + (decay != null ? " decay=" + Arrays.toString(decay) : "") + " " + format;
        }
    }

    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (int mb = 1; mb <= 3; mb++) {
            for (boolean masked : new boolean[] {false, true}) {
                cases.add(new Case(mb, masked, false, 2, 2, false, 0, null, RNNFormat.NCW));
                cases.add(new Case(mb, masked, true, 2, 1, false, 0, null, RNNFormat.NCW));
            }
        }
        cases.add(new Case(1, true, true, 2, 2, true, 0, null, RNNFormat.NCW));
        cases.add(new Case(3, true, true, 4, 2, true, 4, null, RNNFormat.NCW));
        cases.add(new Case(2, true, true, 2, 1, false, 4, new double[] {0.8}, RNNFormat.NCW));
        cases.add(new Case(2, true, true, 2, 2, true, 0, new double[] {0.9, 0.6}, RNNFormat.NWC));
        cases.add(new Case(2, false, false, 4, 1, false, 0, null, RNNFormat.NWC));
        return cases.stream().map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    private static LinearAttentionLayer layer(Case c) {
        LinearAttentionLayer.Builder b = LayerTestSupport.linear(N_IN, 2 * c.nHeads(), c.nHeads())
                .nKvHeads(c.nKvHeads()).causal(c.causal()).learnDecay(c.learn()).chunkSize(c.chunk())
                .dataFormat(c.format());
        if (c.decay() != null) {
            b.decay(c.decay());
        }
        return b.build();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void passesGradientCheckInMultiLayerNetwork(Case c) {
        long seed = SEED + c.toString().hashCode();
        Random rnd = new Random(seed);
        MultiLayerNetwork net = LayerTestSupport.mln(layer(c), DataType.DOUBLE, new NoOp(), seed);
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), c.minibatch(), N_IN, N);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.DOUBLE, c.format(), c.minibatch(), N);
        INDArray mask = c.masked() ? LayerTestSupport.endPaddingMask(DataType.DOUBLE, c.minibatch(), N) : null;

        boolean ok = GradientCheckUtil.checkGradients(new GradientCheckUtil.MLNConfig().net(net).input(x)
                .labels(y).inputMask(mask).labelMask(mask)
                .epsilon(EPS).maxRelError(MAX_REL_ERROR).minAbsoluteError(MIN_ABS_ERROR));

        assertTrue(ok, "gradient check failed for " + c + ", seed " + seed);
    }

    /** Two layers in a row, so the epsilon the upper one passes down is checked too. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"NCW", "NWC"})
    void passesGradientCheckWhenStackedSoInputGradientIsChecked(RNNFormat format) {
        long seed = SEED + 11 + format.ordinal();
        Random rnd = new Random(seed);
        int mb = 3;
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(DataType.DOUBLE).updater(new NoOp()).weightInit(WeightInit.XAVIER)
                .list()
                .layer(LayerTestSupport.linear(N_IN, 4, 2).nKvHeads(1).learnDecay(true).chunkSize(4)
                        .dataFormat(format).build())
                .layer(LayerTestSupport.linear(4, 4, 2).causal(false).dataFormat(format).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(4).nOut(LayerTestSupport.CLASSES).dataFormat(format).build())
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, format, mb, N_IN, N);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.DOUBLE, format, mb, N);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.DOUBLE, mb, N);

        boolean ok = GradientCheckUtil.checkGradients(new GradientCheckUtil.MLNConfig().net(net).input(x)
                .labels(y).inputMask(mask).labelMask(mask)
                .epsilon(EPS).maxRelError(MAX_REL_ERROR).minAbsoluteError(MIN_ABS_ERROR));

        assertTrue(ok, "gradient check failed for two stacked layers, " + format + ", seed " + seed);
    }

    @Test
    void passesGradientCheckInComputationGraphWithMaskGqaAndLearnedDecay() {
        long seed = SEED + 13;
        Random rnd = new Random(seed);
        Case c = new Case(3, true, true, 2, 1, true, 4, null, RNNFormat.NCW);
        ComputationGraph net = LayerTestSupport.graph(layer(c), DataType.DOUBLE, new NoOp(), seed);
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, c.format(), c.minibatch(), N_IN, N);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.DOUBLE, c.format(), c.minibatch(), N);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.DOUBLE, c.minibatch(), N);

        boolean ok = GradientCheckUtil.checkGradients(new GradientCheckUtil.GraphConfig().net(net)
                .inputs(new INDArray[] {x}).labels(new INDArray[] {y})
                .inputMask(new INDArray[] {mask}).labelMask(new INDArray[] {mask})
                .epsilon(EPS).maxRelError(MAX_REL_ERROR).minAbsoluteError(MIN_ABS_ERROR));

        assertTrue(ok, "gradient check failed for ComputationGraph " + c + ", seed " + seed);
    }
}
