package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertIdentical;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Random;
import java.util.stream.Stream;

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

/** {@link LayerNormLayer} configurations survive JSON, and trained networks {@link ModelSerializer}, unchanged. */
class LayerNormLayerSerializationTest {

    @TempDir
    Path dir;

    /** Every setting away from its default, alone, and all of them. */
    static Stream<Arguments> layers() {
        return Stream.of(
                Arguments.of("defaults", new LayerNormLayer.Builder(6)),
                Arguments.of("rms", new LayerNormLayer.Builder(6).rms(true)),
                Arguments.of("eps", new LayerNormLayer.Builder(6).eps(1e-6)),
                Arguments.of("gainInit", new LayerNormLayer.Builder(6).gainInit(0.25)),
                Arguments.of("NWC", new LayerNormLayer.Builder(6).dataFormat(RNNFormat.NWC)),
                Arguments.of("everything", new LayerNormLayer.Builder(6).rms(true).eps(1e-3).gainInit(2)
                        .dataFormat(RNNFormat.NWC).name("final-norm")));
    }

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsMultiLayerConfigurationThroughJson(String name, LayerNormLayer.Builder builder) {
        MultiLayerConfiguration conf = LayerNormNetworks.mlnConf(DataType.FLOAT, new Adam(1e-3), SEED,
                builder.build());

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings((LayerNormLayer) conf.getConf(0).getLayer(),
                (LayerNormLayer) restored.getConf(0).getLayer(), name);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("layers")
    void roundTripsComputationGraphConfigurationThroughJson(String name, LayerNormLayer.Builder builder) {
        ComputationGraphConfiguration conf = LayerNormNetworks.graphConf(builder.build(), DataType.FLOAT,
                new Adam(1e-3), SEED);

        ComputationGraphConfiguration restored = ComputationGraphConfiguration.fromJson(conf.toJson());

        assertEquals(conf, restored, name);
        assertEquals(conf.toJson(), restored.toJson(), name);
        assertSameSettings(norm(conf), norm(restored), name);
    }

    /** A fitted LayerNorm under a fitted RMSNorm, masked: configuration, parameters, updater state, outputs. */
    @Test
    void restoresFittedMultiLayerNetworkWithIdenticalOutputs() throws IOException {
        long seed = SEED + 51;
        Random rnd = new Random(seed);
        MultiLayerNetwork net = LayerNormNetworks.mln(DataType.FLOAT, new Adam(1e-2), seed,
                new LayerNormLayer.Builder(5).build(), new LayerNormLayer.Builder(5).rms(true).eps(1e-4).build());
        INDArray initial = net.params().dup();
        INDArray x = LayerTestSupport.features(rnd, DataType.FLOAT, RNNFormat.NCW, 3, 5, 7);
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
    }

    @Test
    void restoresFittedComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 52;
        Random rnd = new Random(seed);
        ComputationGraph net = LayerNormNetworks.graph(new LayerNormLayer.Builder(5).dataFormat(RNNFormat.NWC)
                .build(), DataType.FLOAT, new Adam(1e-2), seed);
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

    private static LayerNormLayer norm(ComputationGraphConfiguration conf) {
        return (LayerNormLayer) ((LayerVertex) conf.getVertices().get("norm")).getLayerConf().getLayer();
    }

    private static void assertSameSettings(LayerNormLayer expected, LayerNormLayer actual, String name) {
        assertEquals(expected.getNIn(), actual.getNIn(), name + ": nIn");
        assertEquals(expected.getNOut(), actual.getNOut(), name + ": nOut");
        assertEquals(expected.getEps(), actual.getEps(), name + ": eps");
        assertEquals(expected.isRms(), actual.isRms(), name + ": rms");
        assertEquals(expected.getGainInit(), actual.getGainInit(), name + ": gainInit");
        assertEquals(expected.getRnnDataFormat(), actual.getRnnDataFormat(), name + ": rnnDataFormat");
        assertEquals(expected.getLayerName(), actual.getLayerName(), name + ": layer name");
        assertEquals(expected.getActivationFn(), actual.getActivationFn(), name + ": activation");
    }
}
