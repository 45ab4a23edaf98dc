package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertFailsWith;
import static org.attn4j.layers.PositionalNetworks.positional;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * {@link PositionalEmbeddingLayer}: defaults, the width and layout taken from the input type, the parameter table
 * and its initialisation, and bad settings, inputs and masks failing with a message naming the layer, the expected
 * and the actual value.
 */
class PositionalEmbeddingLayerConfigTest {

    private static final String TYPE = "PositionalEmbeddingLayer";

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @Test
    void defaultsToNcwIdentityAndGpt2InitStd() {
        PositionalEmbeddingLayer layer = positional(6, 10).build();
        assertEquals(6, layer.getNIn());
        assertEquals(6, layer.getNOut());
        assertEquals(10, layer.getMaxLength());
        assertEquals(0.02, layer.getInitStd(), 0.0);
        assertEquals(RNNFormat.NCW, layer.dataFormat());
        assertEquals(new ActivationIdentity(), layer.getActivationFn());
    }

    @Test
    void takesTheWidthFromWhicheverOfNInAndNOutIsSet() {
        PositionalEmbeddingLayer fromNIn = new PositionalEmbeddingLayer.Builder().maxLength(4).nIn(5).build();
        PositionalEmbeddingLayer fromNOut = new PositionalEmbeddingLayer.Builder().maxLength(4).nOut(5).build();
        PositionalEmbeddingLayer both = new PositionalEmbeddingLayer.Builder().maxLength(4).nIn(5).nOut(5).build();
        for (PositionalEmbeddingLayer layer : new PositionalEmbeddingLayer[] {fromNIn, fromNOut, both}) {
            assertEquals(5, layer.getNIn());
            assertEquals(5, layer.getNOut());
            assertEquals(5, layer.width());
        }
    }

    @Test
    void rejectsNOutThatDiffersFromNIn() {
        Throwable e = assertThrows(IllegalArgumentException.class,
                () -> new PositionalEmbeddingLayer.Builder().maxLength(4).nIn(6).nOut(8).build());
        assertEquals(TYPE + ": nOut (8) must equal nIn (6): the embedding is added to the input, so the width is "
                + "unchanged", e.getMessage());
    }

    @Test
    void rejectsMissingOrNonPositiveMaxLength() {
        assertFailsWith(IllegalArgumentException.class, () -> new PositionalEmbeddingLayer.Builder().width(4).build(),
                TYPE, "maxLength must be > 0", "got 0");
        assertFailsWith(IllegalArgumentException.class, () -> positional(4, -3).build(),
                TYPE, "maxLength must be > 0", "got -3");
    }

    @Test
    void rejectsInitStdThatIsNegativeOrNotFinite() {
        for (double std : new double[] {-0.1, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertFailsWith(IllegalArgumentException.class, () -> positional(4, 8).initStd(std).build(),
                    TYPE, "initStd must be finite and >= 0", "got " + std);
        }
    }

    @Test
    void rejectsAnActivationOtherThanIdentity() {
        assertFailsWith(IllegalArgumentException.class, () -> positional(4, 8).activation(Activation.TANH).build(),
                TYPE, "activation must be identity", "got tanh");
    }

    @Test
    void namesTheLayerInMessages() {
        assertFailsWith(IllegalArgumentException.class, () -> positional(4, 0).name("wpe").build(),
                TYPE + " \"wpe\"", "maxLength must be > 0", "got 0");
    }

    @Test
    void rejectsMissingWidthWhenTheNetworkIsInitialised() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().list()
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(8).build()).build());
        assertFailsWith(IllegalArgumentException.class, net::init, TYPE, "nIn must be > 0", "got 0",
                "set the width or give an input type");
    }

    @Test
    void takesWidthAndDataFormatFromInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(8).build())
                .layer(positional(6, 8).dataFormat(RNNFormat.NCW).build())
                .setInputType(InputType.recurrent(6, RNNFormat.NWC)).build();
        PositionalEmbeddingLayer first = (PositionalEmbeddingLayer) conf.getConf(0).getLayer();
        PositionalEmbeddingLayer second = (PositionalEmbeddingLayer) conf.getConf(1).getLayer();
        assertEquals(6, first.getNIn());
        assertEquals(6, first.getNOut());
        assertEquals(RNNFormat.NWC, first.dataFormat());
        assertEquals(RNNFormat.NWC, second.dataFormat());
    }

    @Test
    void keepsConfiguredDataFormatWithoutInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(positional(4, 8).dataFormat(RNNFormat.NWC).build())
                .layer(positional(4, 8).build()).build();
        assertEquals(RNNFormat.NWC, ((PositionalEmbeddingLayer) conf.getConf(0).getLayer()).dataFormat());
        assertEquals(RNNFormat.NCW, ((PositionalEmbeddingLayer) conf.getConf(1).getLayer()).dataFormat());
    }

    @Test
    void keepsTheWidthAndLengthInTheOutputType() {
        InputType out = positional(4, 8).dataFormat(RNNFormat.NWC).build()
                .getOutputType(0, InputType.recurrent(4, 7, RNNFormat.NWC));
        assertEquals(InputType.recurrent(4, 7, RNNFormat.NWC), out);
    }

    @Test
    void rejectsNonRecurrentInputTypeForOutputType() {
        PositionalEmbeddingLayer layer = positional(4, 8).build();
        assertFailsWith(IllegalStateException.class, () -> layer.getOutputType(0, InputType.feedForward(4)),
                TYPE, "expected a recurrent input type", "got");
    }

    @Test
    void holdsOneTableOfMaxLengthByWidthViewingTheNetworksParameters() {
        MultiLayerNetwork net = PositionalNetworks.mln(positional(6, 10).build(), DataType.FLOAT, new NoOp(), SEED);
        INDArray p = net.getParam("0_" + PositionalEmbeddingParamInitializer.P);

        assertArrayEquals(new long[] {10, 6}, p.shape());
        assertEquals(60, net.getLayer(0).numParams());
        net.params().putScalar(2 * 6 + 3, 42.0);
        assertEquals(42.0, p.getDouble(2, 3), 0.0, "row p of P is the flat slice [p*width, (p+1)*width)");
    }

    @Test
    void drawsTheTableFromAZeroMeanNormalWithInitStdReproduciblyFromTheSeed() {
        PositionalEmbeddingLayer layer = positional(32, 64).initStd(0.05).build();
        INDArray p = PositionalNetworks.mln(layer, DataType.FLOAT, new NoOp(), SEED).getParam("0_P");
        INDArray again = PositionalNetworks.mln(layer, DataType.FLOAT, new NoOp(), SEED).getParam("0_P");

        assertEquals(0.0, p.meanNumber().doubleValue(), 0.005, "mean of 2048 draws");
        assertEquals(0.05, p.stdNumber().doubleValue(), 0.005, "std of 2048 draws");
        LayerTestSupport.assertIdentical(p, again, "P of two networks with seed " + SEED);
        INDArray zero = PositionalNetworks.mln(positional(4, 8).initStd(0).build(), DataType.FLOAT, new NoOp(), SEED)
                .getParam("0_P");
        assertEquals(0.0, zero.norm1Number().doubleValue(), 0.0, "initStd 0");
    }

    @Test
    void treatsTheTableAsAWeightForRegularization() {
        PositionalEmbeddingLayer layer = positional(4, 8).l2(0.1).build();
        PositionalEmbeddingParamInitializer init = PositionalEmbeddingParamInitializer.getInstance();

        assertTrue(init.isWeightParam(layer, "P"));
        assertTrue(init.biasKeys(layer).isEmpty());
        assertEquals(1, layer.getRegularizationByParam("P").size(), "l2 on P");
    }

    @Test
    void reportsMemoryThroughDl4jsMemoryReport() {
        MultiLayerConfiguration conf = PositionalNetworks.mlnConf(positional(8, 16).build(), DataType.FLOAT,
                new NoOp(), SEED);
        MemoryReport report = conf.getMemoryReport(InputType.recurrent(8, 16));
        long bytes = report.getTotalMemoryBytes(32, MemoryUseMode.TRAINING, CacheMode.NONE, DataType.FLOAT);
        long paramBytes = 4L * 16 * 8;
        assertTrue(bytes > paramBytes, "memory report " + bytes + " bytes, the table alone takes " + paramBytes);
    }

    @Test
    void rejectsInputWithWrongFeatureCount() {
        MultiLayerNetwork net = PositionalNetworks.mln(positional(4, 8).build(), DataType.FLOAT, new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 5, 3);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x), TYPE, "nIn = 4", "[2, 5, 3]");
    }

    @Test
    void rejectsMaskOfWrongShape() {
        MultiLayerNetwork net = PositionalNetworks.mln(positional(4, 8).build(), DataType.FLOAT, new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 4, 3);
        INDArray mask = Nd4j.ones(DataType.FLOAT, 2, 4);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x, false, mask, null),
                TYPE, "mask must have shape [B, N] = [2, 3]", "got [2, 4]");
    }
}
