package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertIdentical;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.stream.Stream;

import org.attn4j.ops.linear.Decay;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.learning.config.NoOp;

/** {@link LinearAttentionLayer} configurations survive JSON, and trained networks {@link ModelSerializer}. */
class LinearAttentionLayerSerializationTest extends AttentionLayerSerializationContract<LinearAttentionLayer> {

    LinearAttentionLayerSerializationTest() {
        super(LinearAttentionLayer.class);
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

    @Override
    String savedJsonResource() {
        return "linear-attention-layer-3117bcd.json";
    }

    /** Every setting away from its default (causal is the default), then every setting unset but non-causal. */
    @Override
    MultiLayerConfiguration savedConfiguration() {
        return new NeuralNetConfiguration.Builder().seed(7).dataType(DataType.FLOAT).updater(new Adam(1e-3)).list()
                .layer(LayerTestSupport.linear(6, 8, 4).nKvHeads(2).headSize(3).decay(0.99, 0.9, 0.8, 0.7)
                        .learnDecay(true).chunkSize(5).dataFormat(RNNFormat.NWC).name("linear").build())
                .layer(LayerTestSupport.linear(8, 6, 2).causal(false).build())
                .build();
    }

    @Override
    void assertSameOwnSettings(LinearAttentionLayer expected, LinearAttentionLayer actual, String name) {
        assertArrayEquals(expected.getDecay(), actual.getDecay(), name + ": decay");
        assertEquals(expected.configuredDecay(), actual.configuredDecay(), name + ": decay in use");
        assertEquals(expected.isLearnDecay(), actual.isLearnDecay(), name + ": learnDecay");
        assertEquals(expected.getChunkSize(), actual.getChunkSize(), name + ": chunkSize");
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
        LinearAttentionLayer layer = LayerTestSupport.linear(5, 8, 4).nKvHeads(2).learnDecay(true).chunkSize(3)
                .build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.FLOAT, new Adam(1e-2), seed);
        INDArray thetaBefore = net.getParam("0_theta").dup();

        MultiLayerNetwork restored = assertRestoresFittedNetwork(net, seed);

        assertIdentical(net.getParam("0_theta"), restored.getParam("0_theta"), "decay logits, seed " + seed);
        assertNotEquals(thetaBefore, net.getParam("0_theta"), "theta did not train, seed " + seed);
    }

    @Test
    void restoresComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 22;
        LinearAttentionLayer layer = LayerTestSupport.linear(5, 6, 3).nKvHeads(1).decay(0.9, 0.8, 0.7)
                .dataFormat(RNNFormat.NWC).build();
        ComputationGraph net = LayerTestSupport.graph(layer, DataType.FLOAT, new Adam(1e-2), seed);

        assertRestoresFittedGraph(net, seed);
    }
}
