package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * DL4J numerical gradient checks of {@link FlashAttentionLayer} in double precision (STYLE.md, "Tests"): multi-head
 * and grouped-query cases here, stacked layers (with partial and scaled rotary embeddings) and a computation graph;
 * windows, multi-query, the NWC format and RoPE cases in {@link FlashAttentionLayerVariantsGradientCheckTest}.
 */
class FlashAttentionLayerGradientCheckTest
        extends AttentionLayerGradientCheckContract<FlashAttentionLayerGradientCheckTest.Case> {

    static final int N_IN = 5;

    /** One layer setting; {@code window} 0 = none, {@code rope} null = none. */
    record Case(int minibatch, boolean masked, boolean causal, int nHeads, int nKvHeads, int window,
                RNNFormat format, RotaryEmbedding rope, boolean restart) implements GradientCase {
        Case(int minibatch, boolean masked, boolean causal, int nHeads, int nKvHeads, int window, RNNFormat format) {
            this(minibatch, masked, causal, nHeads, nKvHeads, window, format, null, false);
        }

        @Override
        public boolean documentsStandAlone() {
            return rope == null || restart;
        }

        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + (causal ? " causal" : " full") + " H=" + nHeads
                    + " Hkv=" + nKvHeads + (window > 0 ? " window=" + window : "") + " " + format
                    + (rope != null ? " " + rope + (restart ? " restarting" : "") : "");
        }
    }

    /** Multi-head and grouped-query attention, full and causal, with and without a mask, batches of 1 to 3. */
    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (int mb = 1; mb <= 3; mb++) {
            for (boolean masked : new boolean[] {false, true}) {
                cases.add(new Case(mb, masked, false, 2, 2, 0, RNNFormat.NCW));
                cases.add(new Case(mb, masked, true, 4, 2, 0, RNNFormat.NCW));
            }
        }
        return cases.stream().map(Arguments::of);
    }

    @Override
    Case firstCase() {
        return new Case(1, false, false, 2, 2, 0, RNNFormat.NCW);
    }

    @Override
    int nIn() {
        return N_IN;
    }

    @Override
    FlashAttentionLayer layer(Case c) {
        return layerOf(c);
    }

    /** The layer of a case. */
    static FlashAttentionLayer layerOf(Case c) {
        return LayerTestSupport.attention(N_IN, 2 * c.nHeads(), c.nHeads()).nKvHeads(c.nKvHeads())
                .causal(c.causal()).slidingWindow(c.window()).dataFormat(c.format()).rope(c.rope())
                .ropeRestartsPerDocument(c.restart()).build();
    }

    /** Two attention layers in a row, so the epsilon the upper one passes down is checked too. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"NCW", "NWC"})
    void passesGradientCheckWhenStackedSoInputGradientIsChecked(RNNFormat format) {
        assertPassesStacked(format, SEED + format.ordinal(),
                LayerTestSupport.attention(N_IN, 4, 2).nKvHeads(1).causal(true).dataFormat(format).build(),
                LayerTestSupport.attention(4, 6, 2).slidingWindow(3).dataFormat(format).build());
    }

    /**
     * RoPE on heads of 4 of which half rotate, with llama3 scaling, then one with linear scaling and no biases,
     * stacked so the input gradient through both rotations is checked.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"NCW", "NWC"})
    void passesGradientCheckWithPartialRotaryAndScaledFrequenciesStacked(RNNFormat format) {
        RotaryEmbedding llama3 = RotaryEmbedding.builder().theta(50).partialRotaryFactor(0.5)
                .scaling(RotaryEmbedding.Scaling.LLAMA3, 8).originalMaxPositions(4).llama3(1, 4).build();
        RotaryEmbedding linear = RotaryEmbedding.builder().theta(1000).scaling(RotaryEmbedding.Scaling.LINEAR, 2)
                .build();
        assertPassesStacked(format, SEED + 31 + format.ordinal(),
                LayerTestSupport.attention(N_IN, 8, 2).nKvHeads(1).causal(true).rope(llama3).dataFormat(format)
                        .build(),
                LayerTestSupport.attention(8, 8, 2).causal(true).rope(linear).qkvBias(false).outputBias(false)
                        .dataFormat(format).build());
    }

    @Test
    void passesGradientCheckInComputationGraphWithMaskAndGqa() {
        assertPassesInComputationGraph(new Case(3, true, true, 4, 2, 0, RNNFormat.NCW), SEED + 7);
    }
}
