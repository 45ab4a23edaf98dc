package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.PositionalNetworks.positional;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Adam;

/** {@link PositionalEmbeddingLayer} configurations survive JSON, and trained networks {@link ModelSerializer}. */
class PositionalEmbeddingLayerSerializationTest extends LayerSerializationContract<PositionalEmbeddingLayer> {

    PositionalEmbeddingLayerSerializationTest() {
        super(PositionalEmbeddingLayer.class, "pos");
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

    @Override
    MultiLayerConfiguration mlnConf(PositionalEmbeddingLayer layer) {
        return PositionalNetworks.mlnConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);
    }

    @Override
    ComputationGraphConfiguration graphConf(PositionalEmbeddingLayer layer) {
        return PositionalNetworks.graphConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);
    }

    @Override
    void assertSameOwnSettings(PositionalEmbeddingLayer expected, PositionalEmbeddingLayer actual, String name) {
        assertEquals(expected.getMaxLength(), actual.getMaxLength(), name + ": maxLength");
        assertEquals(expected.getInitStd(), actual.getInitStd(), 0.0, name + ": initStd");
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

    /** A MultiLayerNetwork (input {@code [3, 5, 7]} NCW, end-padded). */
    @Test
    void restoresMultiLayerNetworkWithIdenticalOutputs() throws IOException {
        long seed = SEED + 1;
        MultiLayerNetwork net = PositionalNetworks.mln(positional(5, 9).build(), DataType.FLOAT, new Adam(1e-2),
                seed);

        assertRestoresFittedNetwork(net, seed);
    }

    /** As for the MultiLayerNetwork, for a ComputationGraph in NWC, unmasked. */
    @Test
    void restoresComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 2;
        ComputationGraph net = PositionalNetworks.graph(positional(5, 9).dataFormat(RNNFormat.NWC).build(),
                DataType.FLOAT, new Adam(1e-2), seed);

        assertRestoresFittedGraph(net, seed);
    }
}
