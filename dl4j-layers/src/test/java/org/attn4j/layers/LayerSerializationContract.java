package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertIdentical;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.io.File;
import java.io.IOException;
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
 * The serialization contract of attn4j's layers (attention, linear attention, layer norm, positional embedding):
 * configurations survive JSON in a MultiLayerConfiguration and a ComputationGraphConfiguration, and fitted
 * networks survive {@link ModelSerializer}, unchanged. A concrete test class supplies
 * {@code static Stream<Arguments> layers()} (a name and a builder per case), the networks the layer sits in, and
 * the checks of its own settings.
 *
 * @param <L> the layer under test
 */
abstract class LayerSerializationContract<L extends RecurrentFeedForwardLayer> {

    @TempDir
    Path dir;

    private final Class<L> layerClass;
    private final String vertex;

    /**
     * @param layerClass the layer under test
     * @param vertex     the name of its vertex in {@link #graphConf}
     */
    LayerSerializationContract(Class<L> layerClass, String vertex) {
        this.layerClass = layerClass;
        this.vertex = vertex;
    }

    /** A float network around {@code layer} (first layer), Adam 1e-3, seed {@code SEED}. */
    abstract MultiLayerConfiguration mlnConf(L layer);

    /** A float graph with {@code layer} as the vertex named in the constructor, Adam 1e-3, seed {@code SEED}. */
    abstract ComputationGraphConfiguration graphConf(L layer);

    /** Asserts that the settings of the layer's own class are equal. */
    abstract void assertSameOwnSettings(L expected, L actual, String name);

    /** Asserts that the settings of the layer's kind (e.g. the attention heads) are equal; none by default. */
    void assertSameKindSettings(L expected, L actual, String name) {
    }

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsMultiLayerConfigurationThroughJson(String name, RecurrentFeedForwardLayer.Builder<?> builder) {
        MultiLayerConfiguration conf = mlnConf(layerClass.cast(builder.build()));

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings(layer(conf, 0), layer(restored, 0), name);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsComputationGraphConfigurationThroughJson(String name,
                                                            RecurrentFeedForwardLayer.Builder<?> builder) {
        ComputationGraphConfiguration conf = graphConf(layerClass.cast(builder.build()));

        ComputationGraphConfiguration restored = ComputationGraphConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings(layer(conf), layer(restored), name);
    }

    /**
     * Fits {@code net} (input {@code [3, nIn, 7]} NCW, end-padded) once, writes it with {@link ModelSerializer},
     * reads it back and asserts that it trained, and that configuration, parameters, updater state and outputs
     * with and without the mask are identical.
     *
     * @return the restored network
     */
    MultiLayerNetwork assertRestoresFittedNetwork(MultiLayerNetwork net, long seed) throws IOException {
        Random rnd = new Random(seed);
        int nIn = (int) layer(net.getLayerWiseConfigurations(), 0).getNIn();
        INDArray initial = net.params().dup();
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NCW, 3, nIn, 7);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, RNNFormat.NCW, 3, 7);
        INDArray mask = LayerTestSupport.endPaddingMask(DataType.FLOAT, 3, 7);
        net.fit(x, y, mask, mask);
        File file = dir.resolve("mln.zip").toFile();

        ModelSerializer.writeModel(net, file, true);
        MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(file, true);

        assertNotEquals(initial, net.params(), "the network did not train, seed " + seed);
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
     * {@link ModelSerializer}, reads it back and asserts that configuration, parameters, updater state and output
     * are identical.
     */
    void assertRestoresFittedGraph(ComputationGraph net, long seed) throws IOException {
        Random rnd = new Random(seed);
        L layer = layer(net.getConfiguration());
        RNNFormat format = layer.dataFormat();
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, format, 2, (int) layer.getNIn(), 6);
        INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.FLOAT, format, 2, 6);
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

    /** Layer {@code index} of {@code conf}. */
    L layer(MultiLayerConfiguration conf, int index) {
        return layerClass.cast(conf.getConf(index).getLayer());
    }

    private L layer(ComputationGraphConfiguration conf) {
        return layerClass.cast(((LayerVertex) conf.getVertices().get(vertex)).getLayerConf().getLayer());
    }

    /** Asserts that DL4J's settings, the layer kind's and the layer's own are equal. */
    void assertSameSettings(L expected, L actual, String name) {
        assertEquals(expected.getNIn(), actual.getNIn(), name + ": nIn");
        assertEquals(expected.getNOut(), actual.getNOut(), name + ": nOut");
        assertSameKindSettings(expected, actual, name);
        assertSameOwnSettings(expected, actual, name);
        assertEquals(expected.getRnnDataFormat(), actual.getRnnDataFormat(), name + ": rnnDataFormat");
        assertEquals(expected.getLayerName(), actual.getLayerName(), name + ": layer name");
        assertEquals(expected.getActivationFn(), actual.getActivationFn(), name + ": activation");
        assertEquals(expected.getWeightInitFn(), actual.getWeightInitFn(), name + ": weight init");
    }
}
