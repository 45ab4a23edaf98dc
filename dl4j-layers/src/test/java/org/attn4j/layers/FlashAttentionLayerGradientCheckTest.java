package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
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

/** DL4J numerical gradient checks of {@link FlashAttentionLayer} in double precision (STYLE.md, "Tests"). */
class FlashAttentionLayerGradientCheckTest {

    private static final double EPS = 1e-6;
    private static final double MAX_REL_ERROR = 1e-3;
    private static final double MIN_ABS_ERROR = 1e-8;
    private static final int N_IN = 5;
    private static final int N = 6;

    /** One layer setting; {@code window} 0 = none. */
    record Case(int minibatch, boolean masked, boolean causal, int nHeads, int nKvHeads, int window,
                RNNFormat format) {
        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + (causal ? " causal" : " full") + " H=" + nHeads
                    + " Hkv=" + nKvHeads + (window > 0 ? " window=" + window : "") + " " + format;
        }
    }

    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (int mb = 1; mb <= 3; mb++) {
            for (boolean masked : new boolean[] {false, true}) {
                cases.add(new Case(mb, masked, false, 2, 2, 0, RNNFormat.NCW));
                cases.add(new Case(mb, masked, true, 4, 2, 0, RNNFormat.NCW));
            }
        }
        cases.add(new Case(2, true, true, 4, 1, 0, RNNFormat.NCW));
        cases.add(new Case(2, false, false, 4, 1, 0, RNNFormat.NCW));
        cases.add(new Case(3, false, false, 2, 2, 2, RNNFormat.NCW));
        cases.add(new Case(3, true, true, 4, 2, 3, RNNFormat.NCW));
        cases.add(new Case(3, true, true, 4, 2, 0, RNNFormat.NWC));
        cases.add(new Case(2, false, false, 2, 1, 2, RNNFormat.NWC));
        return cases.stream().map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    private static FlashAttentionLayer layer(Case c) {
        return LayerTestSupport.attention(N_IN, 2 * c.nHeads(), c.nHeads()).nKvHeads(c.nKvHeads())
                .causal(c.causal()).slidingWindow(c.window()).dataFormat(c.format()).build();
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

    /** Two attention layers in a row, so the epsilon the upper one passes down is checked too. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"NCW", "NWC"})
    void passesGradientCheckWhenStackedSoInputGradientIsChecked(RNNFormat format) {
        long seed = SEED + format.ordinal();
        Random rnd = new Random(seed);
        int mb = 3;
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(DataType.DOUBLE).updater(new NoOp()).weightInit(WeightInit.XAVIER)
                .list()
                .layer(LayerTestSupport.attention(N_IN, 4, 2).nKvHeads(1).causal(true).dataFormat(format).build())
                .layer(LayerTestSupport.attention(4, 6, 2).slidingWindow(3).dataFormat(format).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(6).nOut(LayerTestSupport.CLASSES).dataFormat(format).build())
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
    void passesGradientCheckInComputationGraphWithMaskAndGqa() {
        long seed = SEED + 7;
        Random rnd = new Random(seed);
        Case c = new Case(3, true, true, 4, 2, 0, RNNFormat.NCW);
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
