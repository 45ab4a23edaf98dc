package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import java.util.stream.Stream;

import org.attn4j.ops.linear.Decay;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.graph.LayerVertex;
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
class LinearAttentionLayerSerializationTest {

    @TempDir
    Path dir;

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    /** Every setting away from its default, alone, and all defaults. */
    static Stream<Arguments> layers() {
        return Stream.of(
                Arguments.of("defaults", LayerTestSupport.linear(6, 8, 2)),
                Arguments.of("non-causal", LayerTestSupport.linear(6, 8, 2).causal(false)),
                Arguments.of("GQA", LayerTestSupport.linear(6, 8, 4).nKvHeads(2)),
                Arguments.of("MQA", LayerTestSupport.linear(6, 8, 4).nKvHeads(1)),
                Arguments.of("headSize", LayerTestSupport.linear(6, 7, 2).headSize(5)),
                Arguments.of("one decay", LayerTestSupport.linear(6, 8, 2).decay(0.9)),
                Arguments.of("decay per head", LayerTestSupport.linear(6, 8, 2).decay(0.9, 0.5)),
                Arguments.of("learned decay", LayerTestSupport.linear(6, 8, 2).learnDecay(true)),
                Arguments.of("chunkSize", LayerTestSupport.linear(6, 8, 2).chunkSize(16)),
                Arguments.of("NWC", LayerTestSupport.linear(6, 8, 2).dataFormat(RNNFormat.NWC)),
                Arguments.of("everything", LayerTestSupport.linear(6, 8, 4).nKvHeads(2).headSize(3).decay(0.99, 0.9,
                        0.8, 0.7).learnDecay(true).chunkSize(5).dataFormat(RNNFormat.NWC).name("linear")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsMultiLayerConfigurationThroughJson(String name, LinearAttentionLayer.Builder builder) {
        LinearAttentionLayer layer = builder.build();
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings((LinearAttentionLayer) conf.getConf(0).getLayer(),
                (LinearAttentionLayer) restored.getConf(0).getLayer(), name);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsComputationGraphConfigurationThroughJson(String name, LinearAttentionLayer.Builder builder) {
        LinearAttentionLayer layer = builder.build();
        ComputationGraphConfiguration conf = LayerTestSupport.graphConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);

        ComputationGraphConfiguration restored = ComputationGraphConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        LayerVertex original = (LayerVertex) conf.getVertices().get("attn");
        LayerVertex vertex = (LayerVertex) restored.getVertices().get("attn");
        assertSameSettings((LinearAttentionLayer) original.getLayerConf().getLayer(),
                (LinearAttentionLayer) vertex.getLayerConf().getLayer(), name);
    }

    @Test
    void keepsUnsetDecayHeadSizeAndChunkAsDefaultsThroughJson() {
        LinearAttentionLayer layer = LayerTestSupport.linear(6, 8, 2).build();
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(layer, DataType.FLOAT, new NoOp(), SEED);

        LinearAttentionLayer restored = (LinearAttentionLayer) MultiLayerConfiguration.fromJson(conf.toJson())
                .getConf(0).getLayer();

        assertNull(restored.getDecay());
        assertEquals(Decay.transNormerSlopes(2), restored.configuredDecay());
        assertEquals(0, restored.getHeadSize());
        assertEquals(4, restored.effectiveHeadSize());
        assertEquals(0, restored.getChunkSize());
        assertEquals(2, restored.getNKvHeads());
        assertTrue(restored.isCausal());
    }

    @Test
    void restoresMultiLayerNetworkWithLearnedDecayAndIdenticalOutputs() throws IOException {
        long seed = SEED + 21;
        Random rnd = new Random(seed);
        LinearAttentionLayer layer = LayerTestSupport.linear(5, 8, 4).nKvHeads(2).learnDecay(true).chunkSize(3)
                .build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.FLOAT, new Adam(1e-2), seed);
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NCW, 3, 5, 7);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, RNNFormat.NCW, 3, 7);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.FLOAT, 3, 7);
        INDArray thetaBefore = net.getParam("0_theta").dup();
        net.fit(x, y, mask, mask);
        File file = dir.resolve("mln.zip").toFile();

        ModelSerializer.writeModel(net, file, true);
        MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(file, true);

        assertEquals(net.getLayerWiseConfigurations(), restored.getLayerWiseConfigurations(), "seed " + seed);
        assertIdentical(net.params(), restored.params(), "parameters, seed " + seed);
        assertIdentical(net.getParam("0_theta"), restored.getParam("0_theta"), "decay logits, seed " + seed);
        assertIdentical(net.getUpdater().getStateViewArray(), restored.getUpdater().getStateViewArray(),
                "updater state, seed " + seed);
        assertIdentical(net.output(x, false, mask, null), restored.output(x, false, mask, null),
                "masked output, seed " + seed);
        assertIdentical(net.output(x), restored.output(x), "output, seed " + seed);
        assertNotEquals(thetaBefore, net.getParam("0_theta"), "theta did not train, seed " + seed);
    }

    @Test
    void restoresComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 22;
        Random rnd = new Random(seed);
        LinearAttentionLayer layer = LayerTestSupport.linear(5, 6, 3).nKvHeads(1).decay(0.9, 0.8, 0.7)
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

    private static void assertSameSettings(LinearAttentionLayer expected, LinearAttentionLayer actual, String name) {
        assertEquals(expected.getNIn(), actual.getNIn(), name + ": nIn");
        assertEquals(expected.getNOut(), actual.getNOut(), name + ": nOut");
        assertEquals(expected.getNHeads(), actual.getNHeads(), name + ": nHeads");
        assertEquals(expected.getNKvHeads(), actual.getNKvHeads(), name + ": nKvHeads");
        assertEquals(expected.getHeadSize(), actual.getHeadSize(), name + ": headSize");
        assertEquals(expected.isCausal(), actual.isCausal(), name + ": causal");
        assertArrayEquals(expected.getDecay(), actual.getDecay(), name + ": decay");
        assertEquals(expected.configuredDecay(), actual.configuredDecay(), name + ": decay in use");
        assertEquals(expected.isLearnDecay(), actual.isLearnDecay(), name + ": learnDecay");
        assertEquals(expected.getChunkSize(), actual.getChunkSize(), name + ": chunkSize");
        assertEquals(expected.getRnnDataFormat(), actual.getRnnDataFormat(), name + ": rnnDataFormat");
        assertEquals(expected.getLayerName(), actual.getLayerName(), name + ": layer name");
        assertEquals(expected.getActivationFn(), actual.getActivationFn(), name + ": activation");
        assertEquals(expected.getWeightInitFn(), actual.getWeightInitFn(), name + ": weight init");
    }
}
