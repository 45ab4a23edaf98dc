package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertIdentical;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Random;

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
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

/**
 * Configurations of an attention layer survive JSON, JSON saved before the shared settings moved into
 * {@link AttentionLayerBase} still reads, and trained networks survive {@link ModelSerializer}, unchanged. A
 * concrete test class supplies {@code static Stream<Arguments> layers()} (a name and a builder per case), the
 * saved JSON, and the checks of its own settings.
 *
 * @param <L> the layer under test
 */
abstract class AttentionLayerSerializationContract<L extends AttentionLayerBase> {

    @TempDir
    Path dir;

    private final Class<L> layerClass;

    AttentionLayerSerializationContract(Class<L> layerClass) {
        this.layerClass = layerClass;
    }

    /** The resource, next to this class, holding {@link #savedConfiguration()} as JSON captured at 3117bcd. */
    abstract String savedJsonResource();

    /** The configuration the saved JSON was written from, built again. */
    abstract MultiLayerConfiguration savedConfiguration();

    /** Asserts that the settings of the layer's own class are equal. */
    abstract void assertSameOwnSettings(L expected, L actual, String name);

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsMultiLayerConfigurationThroughJson(String name, AttentionLayerBase.Builder<?> builder) {
        MultiLayerConfiguration conf = LayerTestSupport.mlnConf(builder.build(), DataType.FLOAT, new Adam(1e-3),
                SEED);

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings(layer(conf, 0), layer(restored, 0), name);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsComputationGraphConfigurationThroughJson(String name, AttentionLayerBase.Builder<?> builder) {
        ComputationGraphConfiguration conf = LayerTestSupport.graphConf(builder.build(), DataType.FLOAT,
                new Adam(1e-3), SEED);

        ComputationGraphConfiguration restored = ComputationGraphConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        LayerVertex original = (LayerVertex) conf.getVertices().get("attn");
        LayerVertex vertex = (LayerVertex) restored.getVertices().get("attn");
        assertSameSettings(layerClass.cast(original.getLayerConf().getLayer()),
                layerClass.cast(vertex.getLayerConf().getLayer()), name);
    }

    /** The JSON captured before {@link AttentionLayerBase} existed reads back, and is what the layer writes now. */
    @Test
    void readsAndWritesJsonSavedBeforeTheSharedBaseClass() throws IOException {
        String saved = savedJson();
        MultiLayerConfiguration expected = savedConfiguration();

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(saved);

        assertEquals(expected, restored);
        for (int i = 0; i < expected.getConfs().size(); i++) {
            assertSameSettings(layer(expected, i), layer(restored, i), "layer " + i);
        }
        assertEquals(saved, expected.toJson());
    }

    private String savedJson() throws IOException {
        try (InputStream in = AttentionLayerSerializationContract.class.getResourceAsStream(savedJsonResource())) {
            assertNotNull(in, "resource " + savedJsonResource());
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    /**
     * Fits {@code net} (input {@code [3, nIn, 7]} NCW, end-padded) once, writes it with {@link ModelSerializer},
     * reads it back and asserts that configuration, parameters, updater state and outputs with and without the
     * mask are identical.
     *
     * @return the restored network
     */
    MultiLayerNetwork assertRestoresFittedNetwork(MultiLayerNetwork net, long seed) throws IOException {
        Random rnd = new Random(seed);
        int nIn = (int) layer(net.getLayerWiseConfigurations(), 0).getNIn();
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NCW, 3, nIn, 7);
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
        return restored;
    }

    /**
     * Fits the graph {@code net} (input {@code [2, 6]} steps in the layer's format, unmasked) once, writes it with
     * {@link ModelSerializer}, reads it back and asserts that configuration, parameters and output are identical.
     */
    void assertRestoresFittedGraph(ComputationGraph net, long seed) throws IOException {
        Random rnd = new Random(seed);
        L attention = layerClass.cast(((LayerVertex) net.getConfiguration().getVertices().get("attn"))
                .getLayerConf().getLayer());
        RNNFormat format = attention.dataFormat();
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, format, 2, (int) attention.getNIn(), 6);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, format, 2, 6);
        net.fit(new INDArray[] {x}, new INDArray[] {y});
        File file = dir.resolve("graph.zip").toFile();

        ModelSerializer.writeModel(net, file, true);
        ComputationGraph restored = ModelSerializer.restoreComputationGraph(file, true);

        assertEquals(net.getConfiguration(), restored.getConfiguration(), "seed " + seed);
        assertIdentical(net.params(), restored.params(), "parameters, seed " + seed);
        assertIdentical(net.outputSingle(x), restored.outputSingle(x), "output, seed " + seed);
    }

    private L layer(MultiLayerConfiguration conf, int index) {
        return layerClass.cast(conf.getConf(index).getLayer());
    }

    private void assertSameSettings(L expected, L actual, String name) {
        assertEquals(expected.getNIn(), actual.getNIn(), name + ": nIn");
        assertEquals(expected.getNOut(), actual.getNOut(), name + ": nOut");
        assertEquals(expected.getNHeads(), actual.getNHeads(), name + ": nHeads");
        assertEquals(expected.getNKvHeads(), actual.getNKvHeads(), name + ": nKvHeads");
        assertEquals(expected.getHeadSize(), actual.getHeadSize(), name + ": headSize");
        assertEquals(expected.isCausal(), actual.isCausal(), name + ": causal");
        assertSameOwnSettings(expected, actual, name);
        assertEquals(expected.getRnnDataFormat(), actual.getRnnDataFormat(), name + ": rnnDataFormat");
        assertEquals(expected.getLayerName(), actual.getLayerName(), name + ": layer name");
        assertEquals(expected.getActivationFn(), actual.getActivationFn(), name + ": activation");
        assertEquals(expected.getWeightInitFn(), actual.getWeightInitFn(), name + ": weight init");
    }
}
