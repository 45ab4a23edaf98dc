package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertFailsWith;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Random;

import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.CacheMode;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.memory.MemoryReport;
import org.deeplearning4j.nn.conf.memory.MemoryUseMode;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * {@link LayerNormLayer}'s defaults, width and format from the input type, parameter layout and initial values,
 * and bad settings, inputs and masks failing with a message naming the layer, the expected and the actual value.
 */
class LayerNormLayerConfigTest {

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @Test
    void defaultsToLayerNormWithSmallEpsNcwAndIdentity() {
        LayerNormLayer layer = new LayerNormLayer.Builder().nIn(6).build();

        assertEquals(6, layer.width());
        assertEquals(6, layer.getNOut());
        assertEquals(1e-5, layer.getEps());
        assertFalse(layer.isRms());
        assertNull(layer.getRnnDataFormat());
        assertEquals(RNNFormat.NCW, layer.dataFormat());
        assertEquals(new ActivationIdentity(), layer.getActivationFn());
    }

    @Test
    void acceptsNOutEqualToNIn() {
        assertEquals(6, new LayerNormLayer.Builder().nIn(6).nOut(6).build().width());
    }

    @Test
    void rejectsNOutOtherThanNIn() {
        Throwable e = assertThrows(IllegalArgumentException.class,
                () -> new LayerNormLayer.Builder().nIn(4).nOut(6).build());
        assertEquals("LayerNormLayer: nOut (6) must equal nIn (4); the norm keeps the width, so set nIn only",
                e.getMessage());
    }

    @Test
    void rejectsEpsThatIsNotFiniteAndPositive() {
        for (double eps : new double[] {0.0, -1e-5, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertFailsWith(IllegalArgumentException.class, () -> new LayerNormLayer.Builder(4).eps(eps).build(),
                    "LayerNormLayer", "eps must be finite and > 0", "got " + eps);
        }
    }

    @Test
    void rejectsActivationOtherThanIdentity() {
        assertFailsWith(IllegalArgumentException.class,
                () -> new LayerNormLayer.Builder(4).activation(Activation.RELU).build(),
                "LayerNormLayer", "activation must be identity", "got relu", "ActivationLayer after the norm");
    }

    @Test
    void keepsIdentityWhenTheNetworkSetsAnotherActivation() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().activation(Activation.TANH).list()
                .layer(new LayerNormLayer.Builder(4).build()).build();
        assertEquals(new ActivationIdentity(), ((LayerNormLayer) conf.getConf(0).getLayer()).getActivationFn());
    }

    @Test
    void namesTheLayerInMessages() {
        assertFailsWith(IllegalArgumentException.class,
                () -> new LayerNormLayer.Builder(4).eps(-1).name("ln1").build(),
                "LayerNormLayer \"ln1\"", "eps", "got -1.0");
    }

    @Test
    void rejectsMissingNInWhenTheNetworkIsInitialised() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().list()
                .layer(new LayerNormLayer.Builder().build()).build());
        assertFailsWith(IllegalArgumentException.class, net::init, "LayerNormLayer", "nIn must be > 0", "got 0");
    }

    /** As DL4J's recurrent layers: the input type gives width and format. */
    @Test
    void takesWidthAndDataFormatFromInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(new LayerNormLayer.Builder().build())
                .layer(new LayerNormLayer.Builder().rms(true).dataFormat(RNNFormat.NCW).build())
                .setInputType(InputType.recurrent(6, RNNFormat.NWC)).build();
        for (int i = 0; i < 2; i++) {
            LayerNormLayer layer = (LayerNormLayer) conf.getConf(i).getLayer();
            assertEquals(6, layer.getNIn(), "nIn of layer " + i);
            assertEquals(6, layer.getNOut(), "nOut of layer " + i);
            assertEquals(RNNFormat.NWC, layer.dataFormat(), "format of layer " + i);
        }
        InputType out = conf.getConf(1).getLayer().getOutputType(1, InputType.recurrent(6, 9, RNNFormat.NWC));
        assertEquals(InputType.recurrent(6, 9, RNNFormat.NWC), out);
    }

    @Test
    void keepsConfiguredDataFormatWithoutInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(new LayerNormLayer.Builder(4).dataFormat(RNNFormat.NWC).build())
                .layer(new LayerNormLayer.Builder(4).build()).build();
        assertEquals(RNNFormat.NWC, ((LayerNormLayer) conf.getConf(0).getLayer()).dataFormat());
        assertEquals(RNNFormat.NCW, ((LayerNormLayer) conf.getConf(1).getLayer()).dataFormat());
    }

    @Test
    void rejectsNonRecurrentInputType() {
        LayerNormLayer layer = new LayerNormLayer.Builder(4).build();
        assertFailsWith(IllegalStateException.class, () -> layer.getOutputType(0, InputType.feedForward(4)),
                "LayerNormLayer", "expected a recurrent input type", "got");
        assertFailsWith(IllegalStateException.class, () -> layer.setNIn(InputType.feedForward(4), true),
                "LayerNormLayer", "expected a recurrent input type");
    }

    /** Gain 1 and bias 0 whatever the network's weight init and bias init; RMSNorm has no bias. */
    @Test
    void initialisesGainToOneAndBiasToZeroWhateverTheWeightInit() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().seed(SEED)
                .weightInit(WeightInit.NORMAL).biasInit(0.3).list()
                .layer(new LayerNormLayer.Builder(4).build())
                .layer(new LayerNormLayer.Builder(4).rms(true).build()).build());
        net.init();
        LayerNormParamInitializer init = LayerNormParamInitializer.getInstance();

        LayerNormLayer layerNorm = (LayerNormLayer) net.getLayer(0).conf().getLayer();
        LayerNormLayer rmsNorm = (LayerNormLayer) net.getLayer(1).conf().getLayer();
        assertEquals(List.of("g", "b"), init.paramKeys(layerNorm));
        assertEquals(List.of("g"), init.paramKeys(rmsNorm));
        assertEquals(8, init.numParams(layerNorm));
        assertEquals(4, init.numParams(rmsNorm));
        assertEquals(12, net.numParams());
        assertArrayEquals(new double[] {1, 1, 1, 1}, vector(net.getParam("0_g")), 0.0);
        assertArrayEquals(new double[] {0, 0, 0, 0}, vector(net.getParam("0_b")), 0.0);
        assertArrayEquals(new double[] {1, 1, 1, 1}, vector(net.getParam("1_g")), 0.0);
    }

    @Test
    void startsGainAtTheLayersGainInit() {
        MultiLayerNetwork net = LayerNormNetworks.alone(new LayerNormLayer.Builder(3).gainInit(0.5).build(),
                DataType.FLOAT, SEED);
        assertArrayEquals(new double[] {0.5, 0.5, 0.5}, vector(net.getParam("0_g")), 0.0);
    }

    /** Gain and bias are neither weights nor biases to DL4J, so L2 and weight decay leave them alone. */
    @Test
    void leavesGainAndBiasOutOfWeightRegularisation() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().l2(0.1).l2Bias(0.1)
                .weightDecay(0.1).list().layer(new LayerNormLayer.Builder(4).build()).build());
        net.init();
        LayerNormLayer layer = (LayerNormLayer) net.getLayer(0).conf().getLayer();

        assertEquals(0.0, net.getLayer(0).calcRegularizationScore(true));
        assertNull(layer.getRegularizationByParam("g"));
        assertNull(layer.getRegularizationByParam("b"));
        assertTrue(LayerNormParamInitializer.getInstance().weightKeys(layer).isEmpty());
        assertTrue(LayerNormParamInitializer.getInstance().biasKeys(layer).isEmpty());
    }

    @Test
    void reportsMemoryThroughDl4jsMemoryReport() {
        MultiLayerConfiguration conf = LayerNormNetworks.mlnConf(DataType.FLOAT, new NoOp(), SEED,
                new LayerNormLayer.Builder(8).build());
        MemoryReport report = conf.getMemoryReport(InputType.recurrent(8, 16));
        long bytes = report.getTotalMemoryBytes(32, MemoryUseMode.TRAINING, CacheMode.NONE, DataType.FLOAT);
        assertTrue(bytes > 4L * 16, "memory report " + bytes + " bytes, parameters alone take 64");
    }

    @Test
    void rejectsInputWithWrongFeatureCount() {
        MultiLayerNetwork net = LayerNormNetworks.alone(new LayerNormLayer.Builder(4).build(), DataType.FLOAT, SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 5, 3);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x), "LayerNormLayer", "nIn = 4",
                "[2, 5, 3]");
    }

    @Test
    void rejectsMaskOfWrongShape() {
        MultiLayerNetwork net = LayerNormNetworks.alone(new LayerNormLayer.Builder(4).build(), DataType.FLOAT, SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 4, 3);
        INDArray mask = Nd4j.ones(DataType.FLOAT, 2, 4);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x, false, mask, null),
                "LayerNormLayer", "mask must have shape [B, N] = [2, 3]", "got [2, 4]");
    }

    private static double[] vector(INDArray a) {
        return a.castTo(DataType.DOUBLE).toDoubleVector();
    }
}
