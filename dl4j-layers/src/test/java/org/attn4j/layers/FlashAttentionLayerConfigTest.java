package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.assertFailsWith;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.impl.ActivationIdentity;

/**
 * Defaults, and bad settings failing early with a message naming the layer, the expected and the actual
 * value; the settings every attention layer shares are checked by {@link AttentionLayerConfigContract}.
 */
class FlashAttentionLayerConfigTest extends AttentionLayerConfigContract {

    @Override
    FlashAttentionLayer.Builder builder() {
        return new FlashAttentionLayer.Builder();
    }

    @Override
    String type() {
        return "FlashAttentionLayer";
    }

    @Override
    long paramsOfFourInEightOutTwoHeads() {
        return 4 * 8 * 3 + 8 * 3 + 8 * 8 + 8;
    }

    @Test
    void defaultsKvHeadsToHeadsAndHeadSizeToNOutOverHeads() {
        FlashAttentionLayer layer = LayerTestSupport.attention(4, 12, 3).build();
        assertEquals(3, layer.getNKvHeads());
        assertEquals(4, layer.effectiveHeadSize());
        assertEquals(0.5, layer.effectiveScale(), 0.0);
        assertEquals(RNNFormat.NCW, layer.dataFormat());
        assertEquals(new ActivationIdentity(), layer.getActivationFn());
    }

    @Test
    void rejectsNegativeWindow() {
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.attention(4, 8, 2).slidingWindow(-1).build(),
                "FlashAttentionLayer", "slidingWindow must be >= 0", "got -1");
    }

    @Test
    void rejectsScaleThatIsNotFiniteAndPositive() {
        for (double scale : new double[] {0.0, -1.0, Double.NaN, Double.POSITIVE_INFINITY}) {
            assertFailsWith(IllegalArgumentException.class,
                    () -> LayerTestSupport.attention(4, 8, 2).scale(scale).build(),
                    "FlashAttentionLayer", "scale must be finite and > 0", "got " + scale);
        }
    }

    @Test
    void namesTheLayerInMessages() {
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.attention(4, 16, 8).nKvHeads(3).name("attn1").build(),
                "FlashAttentionLayer \"attn1\"", "nHeads (8)", "nKvHeads (3)");
    }
}
