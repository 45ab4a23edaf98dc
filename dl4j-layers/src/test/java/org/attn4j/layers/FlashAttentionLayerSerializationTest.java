package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.IOException;
import java.util.stream.Stream;

import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.learning.config.NoOp;

/** {@link FlashAttentionLayer} configurations survive JSON, and trained networks {@link ModelSerializer}. */
class FlashAttentionLayerSerializationTest extends AttentionLayerSerializationContract<FlashAttentionLayer> {

    FlashAttentionLayerSerializationTest() {
        super(FlashAttentionLayer.class);
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
                Arguments.of("no biases", LayerTestSupport.attention(6, 8, 2).qkvBias(false).outputBias(false)),
                Arguments.of("q/k/v bias only", LayerTestSupport.attention(6, 8, 2).outputBias(false)),
                Arguments.of("RoPE", LayerTestSupport.attention(6, 8, 2).rope(RotaryEmbedding.of(500000))),
                Arguments.of("RoPE, every setting", LayerTestSupport.attention(6, 16, 2).ropeRestartsPerDocument(true)
                        .rope(RotaryEmbedding.builder().theta(1e6).partialRotaryFactor(0.5)
                                .layout(RotaryEmbedding.Layout.INTERLEAVED).scaling(RotaryEmbedding.Scaling.YARN, 4)
                                .originalMaxPositions(2048).yarnBetas(16, 2).attentionFactor(1.2).mscale(1.0, 0.5)
                                .truncate(false).build())),
                Arguments.of("everything", LayerTestSupport.attention(6, 8, 4).nKvHeads(2).headSize(3).causal(true)
                        .slidingWindow(4).scale(0.5).dataFormat(RNNFormat.NWC).name("attn")));
    }

    @Override
    String savedJsonResource() {
        return "flash-attention-layer-3117bcd.json";
    }

    /** Every setting away from its default, then every setting unset. */
    @Override
    MultiLayerConfiguration savedConfiguration() {
        return new NeuralNetConfiguration.Builder().seed(7).dataType(DataType.FLOAT).updater(new Adam(1e-3)).list()
                .layer(LayerTestSupport.attention(6, 8, 4).nKvHeads(2).headSize(3).causal(true).slidingWindow(4)
                        .scale(0.5).dataFormat(RNNFormat.NWC).name("attn").build())
                .layer(LayerTestSupport.attention(8, 6, 2).build())
                .build();
    }

    @Override
    void assertSameOwnSettings(FlashAttentionLayer expected, FlashAttentionLayer actual, String name) {
        assertEquals(expected.getSlidingWindow(), actual.getSlidingWindow(), name + ": slidingWindow");
        assertEquals(expected.getScale(), actual.getScale(), name + ": scale");
        assertEquals(expected.getRope(), actual.getRope(), name + ": rope");
        assertEquals(expected.isRopeRestartsPerDocument(), actual.isRopeRestartsPerDocument(), name
                + ": ropeRestartsPerDocument");
        assertEquals(expected.isQkvBias(), actual.isQkvBias(), name + ": qkvBias");
        assertEquals(expected.isOutputBias(), actual.isOutputBias(), name + ": outputBias");
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
        FlashAttentionLayer layer = LayerTestSupport.attention(5, 8, 4).nKvHeads(2).causal(true).build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.FLOAT, new Adam(1e-2), seed);

        assertRestoresFittedNetwork(net, seed);
    }

    @Test
    void restoresComputationGraphWithIdenticalOutputs() throws IOException {
        long seed = SEED + 2;
        FlashAttentionLayer layer = LayerTestSupport.attention(5, 6, 3).nKvHeads(1).slidingWindow(3)
                .dataFormat(RNNFormat.NWC).build();
        ComputationGraph net = LayerTestSupport.graph(layer, DataType.FLOAT, new Adam(1e-2), seed);

        assertRestoresFittedGraph(net, seed);
    }
}
