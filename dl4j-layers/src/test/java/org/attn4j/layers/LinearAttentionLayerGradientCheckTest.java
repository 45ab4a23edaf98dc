package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.ValueSource;

/** DL4J numerical gradient checks of {@link LinearAttentionLayer} in double precision (STYLE.md, "Tests"). */
class LinearAttentionLayerGradientCheckTest
        extends AttentionLayerGradientCheckContract<LinearAttentionLayerGradientCheckTest.Case> {

    private static final int N_IN = 3;

    /** One layer setting; {@code chunk} 0 = the op's default (one chunk here), {@code decay} null = slopes. */
    record Case(int minibatch, boolean masked, boolean causal, int nHeads, int nKvHeads, boolean learn, int chunk,
                double[] decay, RNNFormat format) implements GradientCase {
        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + (causal ? " causal" : " full") + " H=" + nHeads
                    + " Hkv=" + nKvHeads + (learn ? " learned" : "") + (chunk > 0 ? " chunk=" + chunk : "")
                    + (decay != null ? " decay=" + Arrays.toString(decay) : "") + " " + format;
        }
    }

    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (int mb = 1; mb <= 3; mb++) {
            for (boolean masked : new boolean[] {false, true}) {
                cases.add(new Case(mb, masked, false, 2, 2, false, 0, null, RNNFormat.NCW));
                cases.add(new Case(mb, masked, true, 2, 1, false, 0, null, RNNFormat.NCW));
            }
        }
        cases.add(new Case(1, true, true, 2, 2, true, 0, null, RNNFormat.NCW));
        cases.add(new Case(3, true, true, 4, 2, true, 4, null, RNNFormat.NCW));
        cases.add(new Case(2, true, true, 2, 1, false, 4, new double[] {0.8}, RNNFormat.NCW));
        cases.add(new Case(2, true, true, 2, 2, true, 0, new double[] {0.9, 0.6}, RNNFormat.NWC));
        cases.add(new Case(2, false, false, 4, 1, false, 0, null, RNNFormat.NWC));
        return cases.stream().map(Arguments::of);
    }

    @Override
    Case firstCase() {
        return new Case(1, false, true, 2, 1, false, 0, null, RNNFormat.NCW);
    }

    @Override
    int nIn() {
        return N_IN;
    }

    @Override
    LinearAttentionLayer layer(Case c) {
        LinearAttentionLayer.Builder b = LayerTestSupport.linear(N_IN, 2 * c.nHeads(), c.nHeads())
                .nKvHeads(c.nKvHeads()).causal(c.causal()).learnDecay(c.learn()).chunkSize(c.chunk())
                .dataFormat(c.format());
        if (c.decay() != null) {
            b.decay(c.decay());
        }
        return b.build();
    }

    /** Two layers in a row, so the epsilon the upper one passes down is checked too. */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"NCW", "NWC"})
    void passesGradientCheckWhenStackedSoInputGradientIsChecked(RNNFormat format) {
        assertPassesStacked(format, SEED + 11 + format.ordinal(),
                LayerTestSupport.linear(N_IN, 4, 2).nKvHeads(1).learnDecay(true).chunkSize(4).dataFormat(format)
                        .build(),
                LayerTestSupport.linear(4, 4, 2).causal(false).dataFormat(format).build());
    }

    @Test
    void passesGradientCheckInComputationGraphWithMaskGqaAndLearnedDecay() {
        assertPassesInComputationGraph(new Case(3, true, true, 2, 1, true, 4, null, RNNFormat.NCW), SEED + 13);
    }
}
