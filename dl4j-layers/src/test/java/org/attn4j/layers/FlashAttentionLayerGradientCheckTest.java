package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.ValueSource;

/** DL4J numerical gradient checks of {@link FlashAttentionLayer} in double precision (STYLE.md, "Tests"). */
class FlashAttentionLayerGradientCheckTest
        extends AttentionLayerGradientCheckContract<FlashAttentionLayerGradientCheckTest.Case> {

    private static final int N_IN = 5;

    /** One layer setting; {@code window} 0 = none. */
    record Case(int minibatch, boolean masked, boolean causal, int nHeads, int nKvHeads, int window,
                RNNFormat format) implements GradientCase {
        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + (causal ? " causal" : " full") + " H=" + nHeads
                    + " Hkv=" + nKvHeads + (window > 0 ? " window=" + window : "") + " " + format;
        }
    }

    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (int mb = 1; mb <= 3; mb++) {
            for (boolean masked : new boolean[] {false, true}) {
                cases.add(new Case(mb, masked, false, 2, 2, 0, RNNFormat.NCW));
                cases.add(new Case(mb, masked, true, 4, 2, 0, RNNFormat.NCW));
            }
        }
        cases.add(new Case(2, true, true, 4, 1, 0, RNNFormat.NCW));
        cases.add(new Case(2, false, false, 4, 1, 0, RNNFormat.NCW));
        cases.add(new Case(3, false, false, 2, 2, 2, RNNFormat.NCW));
        cases.add(new Case(3, true, true, 4, 2, 3, RNNFormat.NCW));
        cases.add(new Case(3, true, true, 4, 2, 0, RNNFormat.NWC));
        cases.add(new Case(2, false, false, 2, 1, 2, RNNFormat.NWC));
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
        return LayerTestSupport.attention(N_IN, 2 * c.nHeads(), c.nHeads()).nKvHeads(c.nKvHeads())
                .causal(c.causal()).slidingWindow(c.window()).dataFormat(c.format()).build();
    }

    /** Two attention layers in a row, so the epsilon the upper one passes down is checked too. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"NCW", "NWC"})
    void passesGradientCheckWhenStackedSoInputGradientIsChecked(RNNFormat format) {
        assertPassesStacked(format, SEED + format.ordinal(),
                LayerTestSupport.attention(N_IN, 4, 2).nKvHeads(1).causal(true).dataFormat(format).build(),
                LayerTestSupport.attention(4, 6, 2).slidingWindow(3).dataFormat(format).build());
    }

    @Test
    void passesGradientCheckInComputationGraphWithMaskAndGqa() {
        assertPassesInComputationGraph(new Case(3, true, true, 4, 2, 0, RNNFormat.NCW), SEED + 7);
    }
}
