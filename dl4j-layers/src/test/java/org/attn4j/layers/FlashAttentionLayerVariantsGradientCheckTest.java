package org.attn4j.layers;

import java.util.List;
import java.util.stream.Stream;

import org.attn4j.layers.FlashAttentionLayerGradientCheckTest.Case;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.junit.jupiter.params.provider.Arguments;

/**
 * DL4J numerical gradient checks of {@link FlashAttentionLayer} in double precision, continued from
 * {@link FlashAttentionLayerGradientCheckTest}: multi-query heads, sliding windows, the NWC format, and RoPE
 * (rotate-half restarting per document; interleaved YaRN with its factor on cos and sin, masked).
 */
class FlashAttentionLayerVariantsGradientCheckTest extends AttentionLayerGradientCheckContract<Case> {

    static Stream<Arguments> cases() {
        return List.of(new Case(2, true, true, 4, 1, 0, RNNFormat.NCW),
                new Case(2, false, false, 4, 1, 0, RNNFormat.NCW),
                new Case(3, false, false, 2, 2, 2, RNNFormat.NCW),
                new Case(3, true, true, 4, 2, 3, RNNFormat.NCW),
                new Case(3, true, true, 4, 2, 0, RNNFormat.NWC),
                new Case(2, false, false, 2, 1, 2, RNNFormat.NWC),
                new Case(3, false, true, 2, 1, 0, RNNFormat.NCW, RotaryEmbedding.of(10000), true),
                new Case(3, true, true, 4, 2, 0, RNNFormat.NWC, RotaryEmbedding.builder().theta(100)
                        .layout(RotaryEmbedding.Layout.INTERLEAVED).scaling(RotaryEmbedding.Scaling.YARN, 4)
                        .originalMaxPositions(4).build(), false)).stream().map(Arguments::of);
    }

    @Override
    Case firstCase() {
        return new Case(2, false, false, 4, 1, 0, RNNFormat.NCW);
    }

    @Override
    int nIn() {
        return FlashAttentionLayerGradientCheckTest.N_IN;
    }

    @Override
    FlashAttentionLayer layer(Case c) {
        return FlashAttentionLayerGradientCheckTest.layerOf(c);
    }
}
