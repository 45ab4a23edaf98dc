package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
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
import org.junit.jupiter.api.function.Executable;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * Defaults, and bad settings failing early with a message naming the layer, the expected and the actual
 * value.
 */
class FlashAttentionLayerConfigTest {

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    private static void assertFailsWith(Class<? extends Throwable> type, Executable build, String... parts) {
        Throwable e = assertThrows(type, build);
        for (String part : parts) {
            assertTrue(e.getMessage().contains(part), "message \"" + e.getMessage() + "\" lacks \"" + part + "\"");
        }
    }

    @Test
    void defaultsKvHeadsToHeadsAndHeadSizeToNOutOverHeads() {
        FlashAttentionLayer layer = LayerTestSupport.attention(4, 12, 3).build();
        assertEquals(3, layer.getNKvHeads());
        assertEquals(4, layer.effectiveHeadSize());
        assertEquals(0.5, layer.effectiveScale(), 0.0);
        assertEquals(RNNFormat.NCW, layer.dataFormat());
        assertEquals(new ActivationIdentity(), layer.getActivationFn());
    }

    /** As DL4J's recurrent layers: the input type's format wins, as it does for DL4J's own layers. */
    @Test
    void takesDataFormatFromInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(LayerTestSupport.attention(4, 8, 2).build())
                .layer(LayerTestSupport.attention(8, 8, 2).dataFormat(RNNFormat.NCW).build())
                .setInputType(InputType.recurrent(4, RNNFormat.NWC)).build();
        assertEquals(RNNFormat.NWC, ((FlashAttentionLayer) conf.getConf(0).getLayer()).dataFormat());
        assertEquals(RNNFormat.NWC, ((FlashAttentionLayer) conf.getConf(1).getLayer()).dataFormat());
    }

    @Test
    void keepsConfiguredDataFormatWithoutInputType() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(LayerTestSupport.attention(4, 8, 2).dataFormat(RNNFormat.NWC).build())
                .layer(LayerTestSupport.attention(8, 8, 2).build()).build();
        assertEquals(RNNFormat.NWC, ((FlashAttentionLayer) conf.getConf(0).getLayer()).dataFormat());
        assertEquals(RNNFormat.NCW, ((FlashAttentionLayer) conf.getConf(1).getLayer()).dataFormat());
    }

    @Test
    void reportsMemoryThroughDl4jsMemoryReport() {
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(LayerTestSupport.attention(4, 8, 2).build(),
                DataType.FLOAT, new NoOp(), SEED);
        MemoryReport report = conf.getMemoryReport(InputType.recurrent(4, 16));
        long bytes = report.getTotalMemoryBytes(32, MemoryUseMode.TRAINING, CacheMode.NONE, DataType.FLOAT);
        long paramBytes = 4L * (4 * 8 * 3 + 8 * 3 + 8 * 8 + 8);
        assertTrue(bytes > paramBytes, "memory report " + bytes + " bytes, parameters alone take " + paramBytes);
    }

    @Test
    void rejectsHeadsThatAreNotAMultipleOfKvHeads() {
        Throwable e = assertThrows(IllegalArgumentException.class,
                () -> LayerTestSupport.attention(4, 16, 8).nKvHeads(3).build());
        assertEquals("FlashAttentionLayer: nHeads (8) must be a multiple of nKvHeads (3)", e.getMessage());
    }

    @Test
    void rejectsNOutThatHeadsDoNotDivideWhenHeadSizeIsUnset() {
        assertFailsWith(IllegalArgumentException.class, () -> LayerTestSupport.attention(4, 10, 4).build(),
                "FlashAttentionLayer", "nOut (10)", "multiple of nHeads (4)");
    }

    @Test
    void acceptsNOutThatHeadsDoNotDivideWhenHeadSizeIsSet() {
        FlashAttentionLayer layer = LayerTestSupport.attention(4, 10, 4).headSize(3).build();
        assertEquals(3, layer.effectiveHeadSize());
    }

    @Test
    void rejectsNonPositiveHeadCounts() {
        assertFailsWith(IllegalArgumentException.class, () -> LayerTestSupport.attention(4, 8, 0).build(),
                "FlashAttentionLayer", "nHeads must be > 0", "got 0");
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.attention(4, 8, 2).nKvHeads(-1).build(),
                "FlashAttentionLayer", "nKvHeads must be > 0", "got -1");
    }

    @Test
    void rejectsNegativeHeadSizeAndWindow() {
        assertFailsWith(IllegalArgumentException.class, () -> LayerTestSupport.attention(4, 8, 2).headSize(-2).build(),
                "FlashAttentionLayer", "headSize", "got -2");
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.attention(4, 8, 2).slidingWindow(-1).build(),
                "FlashAttentionLayer", "slidingWindow must be >= 0", "got -1");
    }

    @Test
    void rejectsScaleThatIsNotFiniteAndPositive() {
        for (double scale : new double[] {0.0, -1.0, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertFailsWith(IllegalArgumentException.class,
                    () -> LayerTestSupport.attention(4, 8, 2).scale(scale).build(),
                    "FlashAttentionLayer", "scale must be finite and > 0", "got " + scale);
        }
    }

    @Test
    void namesTheLayerInMessages() {
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.attention(4, 16, 8).nKvHeads(3).name("attn1").build(),
                "FlashAttentionLayer \"attn1\"", "nHeads (8)", "nKvHeads (3)");
    }

    @Test
    void rejectsMissingNInWhenTheNetworkIsInitialised() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().list()
                .layer(new FlashAttentionLayer.Builder().nOut(8).nHeads(2).build()).build());
        assertFailsWith(IllegalArgumentException.class, net::init, "FlashAttentionLayer", "nIn must be > 0", "got 0");
    }

    @Test
    void rejectsNonRecurrentInputTypeForOutputType() {
        FlashAttentionLayer layer = LayerTestSupport.attention(4, 8, 2).build();
        assertFailsWith(IllegalStateException.class, () -> layer.getOutputType(0, InputType.feedForward(4)),
                "FlashAttentionLayer", "expected a recurrent input type", "got");
    }

    @Test
    void rejectsInputWithWrongFeatureCount() {
        MultiLayerNetwork net = LayerTestSupport.mln(LayerTestSupport.attention(4, 8, 2).build(), DataType.FLOAT,
                new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 5, 3);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x),
                "FlashAttentionLayer", "nIn = 4", "[2, 5, 3]");
    }

    @Test
    void rejectsMaskOfWrongShape() {
        MultiLayerNetwork net = LayerTestSupport.mln(LayerTestSupport.attention(4, 8, 2).build(), DataType.FLOAT,
                new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.FLOAT, RNNFormat.NCW, 2, 4, 3);
        INDArray mask = Nd4j.ones(DataType.FLOAT, 2, 4);
        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x, false, mask, null),
                "FlashAttentionLayer", "mask must have shape [B, N] = [2, 3]", "got [2, 4]");
    }
}
