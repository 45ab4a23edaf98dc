package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertFailsWith;
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
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * What every attention layer's configuration does alike ({@link AttentionLayerBase}): the data format, the memory
 * report, and bad head settings, input types, inputs and masks failing with a message naming the layer, the
 * expected and the actual value. A concrete test class names the layer and adds its own settings' tests.
 */
abstract class AttentionLayerConfigContract {

    /** A builder of the layer under test with its defaults. */
    abstract AttentionLayerBase.Builder<?> builder();

    /** The layer's name in messages, e.g. {@code FlashAttentionLayer}. */
    abstract String type();

    /** The parameter count of {@code layer(4, 8, 2)}. */
    abstract long paramsOfFourInEightOutTwoHeads();

    /** A small layer of the type under test; callers adjust the builder. */
    AttentionLayerBase.Builder<?> layer(int nIn, int nOut, int nHeads) {
        return builder().nIn(nIn).nOut(nOut).nHeads(nHeads);
    }

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    /** As DL4J's recurrent layers: the input type's format wins, as it does for DL4J's own layers. */
    @Test
    void takesDataFormatFromInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(layer(4, 8, 2).build())
                .layer(layer(8, 8, 2).dataFormat(RNNFormat.NCW).build())
                .setInputType(InputType.recurrent(4, RNNFormat.NWC)).build();
        assertEquals(RNNFormat.NWC, ((AttentionLayerBase) conf.getConf(0).getLayer()).dataFormat());
        assertEquals(RNNFormat.NWC, ((AttentionLayerBase) conf.getConf(1).getLayer()).dataFormat());
    }

    @Test
    void keepsConfiguredDataFormatWithoutInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(layer(4, 8, 2).dataFormat(RNNFormat.NWC).build())
                .layer(layer(8, 8, 2).build()).build();
        assertEquals(RNNFormat.NWC, ((AttentionLayerBase) conf.getConf(0).getLayer()).dataFormat());
        assertEquals(RNNFormat.NCW, ((AttentionLayerBase) conf.getConf(1).getLayer()).dataFormat());
    }

    @Test
    void reportsMemoryThroughDl4jsMemoryReport() {
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(layer(4, 8, 2).build(), DataType.FLOAT, new NoOp(),
                SEED);
        MemoryReport report = conf.getMemoryReport(InputType.recurrent(4, 16));
        long bytes = report.getTotalMemoryBytes(32, MemoryUseMode.TRAINING, CacheMode.NONE, DataType.FLOAT);
        long paramBytes = 4L * paramsOfFourInEightOutTwoHeads();
        assertTrue(bytes > paramBytes, "memory report " + bytes + " bytes, parameters alone take " + paramBytes);
    }

    @Test
    void rejectsHeadsThatAreNotAMultipleOfKvHeads() {
        Throwable e = assertThrows(IllegalArgumentException.class, () -> layer(4, 16, 8).nKvHeads(3).build());
        assertEquals(type() + ": nHeads (8) must be a multiple of nKvHeads (3)", e.getMessage());
    }

    @Test
    void rejectsNOutThatHeadsDoNotDivideWhenHeadSizeIsUnset() {
        assertFailsWith(IllegalArgumentException.class, () -> layer(4, 10, 4).build(),
                type(), "nOut (10)", "multiple of nHeads (4)");
    }

    @Test
    void acceptsNOutThatHeadsDoNotDivideWhenHeadSizeIsSet() {
        AttentionLayerBase layer = layer(4, 10, 4).headSize(3).build();
        assertEquals(3, layer.effectiveHeadSize());
    }

    @Test
    void rejectsNonPositiveHeadCounts() {
        assertFailsWith(IllegalArgumentException.class, () -> layer(4, 8, 0).build(),
                type(), "nHeads must be > 0", "got 0");
        assertFailsWith(IllegalArgumentException.class, () -> layer(4, 8, 2).nKvHeads(-1).build(),
                type(), "nKvHeads must be > 0", "got -1");
    }

    @Test
    void rejectsNegativeHeadSize() {
        assertFailsWith(IllegalArgumentException.class, () -> layer(4, 8, 2).headSize(-2).build(),
                type(), "headSize", "got -2");
    }

    @Test
    void rejectsMissingNInWhenTheNetworkIsInitialised() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().list()
                .layer(builder().nOut(8).nHeads(2).build()).build());
        assertFailsWith(IllegalArgumentException.class, net::init, type(), "nIn must be > 0", "got 0");
    }

    @Test
    void rejectsNonRecurrentInputTypeForOutputType() {
        AttentionLayerBase layer = layer(4, 8, 2).build();
        assertFailsWith(IllegalStateException.class, () -> layer.getOutputType(0, InputType.feedForward(4)),
                type(), "expected a recurrent input type", "got");
    }

    @Test
    void rejectsInputWithWrongFeatureCount() {
        MultiLayerNetwork net = LayerTestSupport.mln(layer(4, 8, 2).build(), DataType.FLOAT, new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 5, 3);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x), type(), "nIn = 4", "[2, 5, 3]");
    }

    @Test
    void rejectsMaskOfWrongShape() {
        MultiLayerNetwork net = LayerTestSupport.mln(layer(4, 8, 2).build(), DataType.FLOAT, new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 4, 3);
        INDArray mask = Nd4j.ones(DataType.FLOAT, 2, 4);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x, false, mask, null),
                type(), "mask must have shape [B, N] = [2, 3]", "got [2, 4]");
    }
}
