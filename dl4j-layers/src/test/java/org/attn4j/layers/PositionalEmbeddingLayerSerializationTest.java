package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertIdentical;
import static org.attn4j.layers.PositionalNetworks.positional;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.graph.LayerVertex;
import org.deeplearning4j.nn.conf.inputs.InputType;
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

/** {@link PositionalEmbeddingLayer} configurations survive JSON, and trained networks {@link ModelSerializer}. */
class PositionalEmbeddingLayerSerializationTest {

    @TempDir
    Path dir;

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    /** Every setting away from its default, alone, and all defaults. */
    static Stream<Arguments> layers() {
        return Stream.of(
                Arguments.of("defaults", positional(6, 12)),
                Arguments.of("width from nIn", new PositionalEmbeddingLayer.Builder().nIn(6).maxLength(12)),
                Arguments.of("initStd", positional(6, 12).initStd(0.1)),
                Arguments.of("NWC", positional(6, 12).dataFormat(RNNFormat.NWC)),
                Arguments.of("everything", positional(6, 20).initStd(0.0).dataFormat(RNNFormat.NWC).name("wpe")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsMultiLayerConfigurationThroughJson(String name, PositionalEmbeddingLayer.Builder builder) {
        MultiLayerConfiguration conf = PositionalNetworks.mlnConf(builder.build(), DataType.FLOAT, new Adam(1e-3),
                SEED);

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings((PositionalEmbeddingLayer) conf.getConf(0).getLayer(),
                (PositionalEmbeddingLayer) restored.getConf(0).getLayer(), name);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsComputationGraphConfigurationThroughJson(String name, PositionalEmbeddingLayer.Builder builder) {
        ComputationGraphConfiguration conf = PositionalNetworks.graphConf(builder.build(), DataType.FLOAT,
                new Adam(1e-3), SEED);

        ComputationGraphConfiguration restored = ComputationGraphConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings(layer(conf), layer(restored), name);
    }

    /** The settings appear in the JSON under their bean names, and a different setting is a different layer. */
    @Test
    void writesItsSettingsAsNamedJsonProperties() {
        MultiLayerConfiguration conf = PositionalNetworks.mlnConf(positional(6, 12).initStd(0.1)
                .dataFormat(RNNFormat.NWC).build(), DataType.FLOAT, new Adam(1e-3), SEED);
        String json = conf.toJson();

        assertTrue(json.contains("\"@class\" : \"org.attn4j.layers.PositionalEmbeddingLayer\""), json);
        assertTrue(json.contains("\"maxLength\" : 12"), json);
        assertTrue(json.contains("\"initStd\" : 0.1"), json);
        assertTrue(json.contains("\"rnnDataFormat\" : \"NWC\""), json);
        assertNotEquals(positional(6, 12).build(), positional(6, 13).build());
        assertNotEquals(positional(6, 12).build(), positional(6, 12).initStd(0.1).build());
        assertNotEquals(positional(6, 12).build(), positional(6, 12).dataFormat(RNNFormat.NWC).build());
    }

    /** A width left to the input type is written after it was taken, and reads back. */
    @Test
    void keepsTheWidthTakenFromTheInputTypeThroughJson() {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().list()
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(8).build())
                .setInputType(InputType.recurrent(5, RNNFormat.NWC)).build();

        PositionalEmbeddingLayer restored = (PositionalEmbeddingLayer) MultiLayerConfiguration.fromJson(conf.toJson())
                .getConf(0).getLayer();

        assertEquals(5, restored.getNIn());
        assertEquals(5, restored.getNOut());
        assertEquals(RNNFormat.NWC, restored.getRnnDataFormat());
    }

    /**
     * Fits a MultiLayerNetwork (input {@code [3, 5, 7]} NCW, end-padded) once, writes it with {@link ModelSerializer},
     * reads it back: configuration, parameters, updater state and outputs with and without the mask are identical.
     */
    @Test
    void restoresMultiLayerNetworkWithIdenticalOutputs() throws IOException {
        long seed = SEED + 1;
        Random rnd = new Random(seed);
        MultiLayerNetwork net = PositionalNetworks.mln(positional(5, 9).build(), DataType.FLOAT, new Adam(1e-2),
                seed);
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

    /** As for the MultiLayerNetwork, for a ComputationGraph in NWC, unmasked. */
    @Test
    void restoresComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 2;
        Random rnd = new Random(seed);
        ComputationGraph net = PositionalNetworks.graph(positional(5, 9).dataFormat(RNNFormat.NWC).build(),
                DataType.FLOAT, new Adam(1e-2), seed);
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NWC, 2, 5, 6);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, RNNFormat.NWC, 2, 6);
        net.fit(new INDArray[] {x}, new INDArray[] {y});
        File file = dir.resolve("graph.zip").toFile();

        ModelSerializer.writeModel(net, file, true);
        ComputationGraph restored = ModelSerializer.restoreComputationGraph(file, true);

        assertEquals(net.getConfiguration(), restored.getConfiguration(), "seed " + seed);
        assertIdentical(net.params(), restored.params(), "parameters, seed " + seed);
        assertIdentical(net.getUpdater().getStateViewArray(), restored.getUpdater().getStateViewArray(),
                "updater state, seed " + seed);
        assertIdentical(net.outputSingle(x), restored.outputSingle(x), "output, seed " + seed);
    }

    private static PositionalEmbeddingLayer layer(ComputationGraphConfiguration conf) {
        return (PositionalEmbeddingLayer) ((LayerVertex) conf.getVertices().get("pos")).getLayerConf().getLayer();
    }

    private static void assertSameSettings(PositionalEmbeddingLayer expected, PositionalEmbeddingLayer actual,
                                           String name) {
        assertEquals(expected.getNIn(), actual.getNIn(), name + ": nIn");
        assertEquals(expected.getNOut(), actual.getNOut(), name + ": nOut");
        assertEquals(expected.getMaxLength(), actual.getMaxLength(), name + ": maxLength");
        assertEquals(expected.getInitStd(), actual.getInitStd(), 0.0, name + ": initStd");
        assertEquals(expected.getRnnDataFormat(), actual.getRnnDataFormat(), name + ": rnnDataFormat");
        assertEquals(expected.getLayerName(), actual.getLayerName(), name + ": layer name");
        assertEquals(expected.getActivationFn(), actual.getActivationFn(), name + ": activation");
    }
}
