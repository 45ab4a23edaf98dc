package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Adam;

/** {@link LayerNormLayer} configurations survive JSON, and trained networks {@link ModelSerializer}, unchanged. */
class LayerNormLayerSerializationTest extends LayerSerializationContract<LayerNormLayer> {

    LayerNormLayerSerializationTest() {
        super(LayerNormLayer.class, "norm");
    }

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

    @Override
    MultiLayerConfiguration mlnConf(LayerNormLayer layer) {
        return LayerNormNetworks.mlnConf(DataType.FLOAT, new Adam(1e-3), SEED, layer);
    }

    @Override
    ComputationGraphConfiguration graphConf(LayerNormLayer layer) {
        return LayerNormNetworks.graphConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);
    }

    @Override
    void assertSameOwnSettings(LayerNormLayer expected, LayerNormLayer actual, String name) {
        assertEquals(expected.getEps(), actual.getEps(), name + ": eps");
        assertEquals(expected.isRms(), actual.isRms(), name + ": rms");
        assertEquals(expected.getGainInit(), actual.getGainInit(), name + ": gainInit");
    }

    /** A fitted LayerNorm under a fitted RMSNorm, masked: configuration, parameters, updater state, outputs. */
    @Test
    void restoresFittedMultiLayerNetworkWithIdenticalOutputs() throws IOException {
        long seed = SEED + 51;
        MultiLayerNetwork net = LayerNormNetworks.mln(DataType.FLOAT, new Adam(1e-2), seed,
                new LayerNormLayer.Builder(5).build(), new LayerNormLayer.Builder(5).rms(true).eps(1e-4).build());

        assertRestoresFittedNetwork(net, seed);
    }

    @Test
    void restoresFittedComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 52;
        ComputationGraph net = LayerNormNetworks.graph(new LayerNormLayer.Builder(5).dataFormat(RNNFormat.NWC)
                .build(), DataType.FLOAT, new Adam(1e-2), seed);

        assertRestoresFittedGraph(net, seed);
    }
}
