package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.learning.config.NoOp;

/** Configurations survive JSON, and trained networks survive {@link ModelSerializer}, unchanged. */
class FlashAttentionLayerSerializationTest {

    @TempDir
    Path dir;

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    /** Every setting away from its default, alone, and all defaults. */
    static Stream<Arguments> layers() {
        return Stream.of(
                Arguments.of("defaults", LayerTestSupport.attention(6, 8, 2)),
                Arguments.of("causal", LayerTestSupport.attention(6, 8, 2).causal(true)),
                Arguments.of("GQA", LayerTestSupport.attention(6, 8, 4).nKvHeads(2)),
                Arguments.of("MQA", LayerTestSupport.attention(6, 8, 4).nKvHeads(1)),
                Arguments.of("sliding window", LayerTestSupport.attention(6, 8, 2).slidingWindow(3)),
                Arguments.of("scale", LayerTestSupport.attention(6, 8, 2).scale(0.25)),
                Arguments.of("headSize", LayerTestSupport.attention(6, 7, 2).headSize(5)),
                Arguments.of("NWC", LayerTestSupport.attention(6, 8, 2).dataFormat(RNNFormat.NWC)),
                Arguments.of("everything", LayerTestSupport.attention(6, 8, 4).nKvHeads(2).headSize(3).causal(true)
                        .slidingWindow(4).scale(0.5).dataFormat(RNNFormat.NWC).name("attn")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsMultiLayerConfigurationThroughJson(String name, FlashAttentionLayer.Builder builder) {
        FlashAttentionLayer layer = builder.build();
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings((FlashAttentionLayer) conf.getConf(0).getLayer(),
                (FlashAttentionLayer) restored.getConf(0).getLayer(), name);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsComputationGraphConfigurationThroughJson(String name, FlashAttentionLayer.Builder builder) {
        FlashAttentionLayer layer = builder.build();
        ComputationGraphConfiguration conf = LayerTestSupport.graphConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);

        ComputationGraphConfiguration restored = ComputationGraphConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        org.deeplearning4j.nn.conf.graph.LayerVertex vertex =
                (org.deeplearning4j.nn.conf.graph.LayerVertex) restored.getVertices().get("attn");
        org.deeplearning4j.nn.conf.graph.LayerVertex original =
                (org.deeplearning4j.nn.conf.graph.LayerVertex) conf.getVertices().get("attn");
        assertSameSettings((FlashAttentionLayer) original.getLayerConf().getLayer(),
                (FlashAttentionLayer) vertex.getLayerConf().getLayer(), name);
    }

    @Test
    void keepsUnsetScaleAndHeadSizeAsDefaultsThroughJson() {
        FlashAttentionLayer layer = LayerTestSupport.attention(6, 8, 2).build();
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(layer, DataType.FLOAT, new NoOp(), SEED);

        FlashAttentionLayer restored = (FlashAttentionLayer) MultiLayerConfiguration.fromJson(conf.toJson())
                .getConf(0).getLayer();

        assertNull(restored.getScale());
        assertEquals(0, restored.getHeadSize());
        assertEquals(4, restored.effectiveHeadSize());
        assertEquals(0.5, restored.effectiveScale(), 0.0);
        assertEquals(2, restored.getNKvHeads());
    }

    @Test
    void restoresMultiLayerNetworkWithIdenticalOutputs() throws IOException {
        long seed = SEED + 1;
        Random rnd = new Random(seed);
        FlashAttentionLayer layer = LayerTestSupport.attention(5, 8, 4).nKvHeads(2).causal(true).build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.FLOAT, new Adam(1e-2), seed);
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NCW, 3, 5, 7);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, RNNFormat.NCW, 3, 7);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.FLOAT, 3, 7);
        net.fit(x, y, mask, mask);
        File file = dir.resolve("mln.zip").toFile();

        ModelSerializer.writeModel(net, file, true);
        MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(file, true);

        assertEquals(net.getLayerWiseConfigurations(), restored.getLayerWiseConfigurations(), "seed " + seed);
        assertIdentical(net.params(), restored.params(), "parameters, seed " + seed);
        assertIdentical(net.getUpdater().getStateViewArray(), restored.getUpdater().getStateViewArray(),
                "updater state, seed " + seed);
        assertIdentical(net.output(x, false, mask, null), restored.output(x, false, mask, null),
                "masked output, seed " + seed);
        assertIdentical(net.output(x), restored.output(x), "output, seed " + seed);
    }

    @Test
    void restoresComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 2;
        Random rnd = new Random(seed);
        FlashAttentionLayer layer = LayerTestSupport.attention(5, 6, 3).nKvHeads(1).slidingWindow(3)
                .dataFormat(RNNFormat.NWC).build();
        ComputationGraph net = LayerTestSupport.graph(layer, DataType.FLOAT, new Adam(1e-2), seed);
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NWC, 2, 5, 6);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, RNNFormat.NWC, 2, 6);
        net.fit(new INDArray[] {x}, new INDArray[] {y});
        File file = dir.resolve("graph.zip").toFile();

        ModelSerializer.writeModel(net, file, true);
        ComputationGraph restored = ModelSerializer.restoreComputationGraph(file, true);

        assertEquals(net.getConfiguration(), restored.getConfiguration(), "seed " + seed);
        assertIdentical(net.params(), restored.params(), "parameters, seed " + seed);
        assertIdentical(net.outputSingle(x), restored.outputSingle(x), "output, seed " + seed);
    }

    private static void assertIdentical(INDArray expected, INDArray actual, String what) {
        assertArrayEquals(expected.shape(), actual.shape(), what + ": shape");
        assertArrayEquals(expected.castTo(DataType.DOUBLE).reshape(expected.length()).toDoubleVector(),
                actual.castTo(DataType.DOUBLE).reshape(actual.length()).toDoubleVector(), what);
    }

    private static void assertSameSettings(FlashAttentionLayer expected, FlashAttentionLayer actual, String name) {
        assertEquals(expected.getNIn(), actual.getNIn(), name + ": nIn");
        assertEquals(expected.getNOut(), actual.getNOut(), name + ": nOut");
        assertEquals(expected.getNHeads(), actual.getNHeads(), name + ": nHeads");
        assertEquals(expected.getNKvHeads(), actual.getNKvHeads(), name + ": nKvHeads");
        assertEquals(expected.getHeadSize(), actual.getHeadSize(), name + ": headSize");
        assertEquals(expected.isCausal(), actual.isCausal(), name + ": causal");
        assertEquals(expected.getSlidingWindow(), actual.getSlidingWindow(), name + ": slidingWindow");
        assertEquals(expected.getScale(), actual.getScale(), name + ": scale");
        assertEquals(expected.getRnnDataFormat(), actual.getRnnDataFormat(), name + ": rnnDataFormat");
        assertEquals(expected.getLayerName(), actual.getLayerName(), name + ": layer name");
        assertEquals(expected.getActivationFn(), actual.getActivationFn(), name + ": activation");
        assertEquals(expected.getWeightInitFn(), actual.getWeightInitFn(), name + ": weight init");
    }
}
