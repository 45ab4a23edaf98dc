package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * DL4J numerical gradient checks of {@link LayerNormLayer} in double precision (STYLE.md, "Tests"; see
 * {@link GradientChecks}), with gains and biases moved away from their initial 1 and 0. The epsilon a norm passes
 * down is checked where another layer's parameters sit below it.
 */
class LayerNormLayerGradientCheckTest {

    private static final int WIDTH = 4;
    private static final int N = 6;

    /** One setting of the norm and its data. */
    record Case(int minibatch, boolean masked, boolean rms, RNNFormat format) {
        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + (rms ? " RMSNorm" : " LayerNorm") + " " + format;
        }
    }

    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (RNNFormat format : RNNFormat.values()) {
            for (boolean rms : new boolean[] {false, true}) {
                for (int mb = 1; mb <= 3; mb++) {
                    for (boolean masked : new boolean[] {false, true}) {
                        cases.add(new Case(mb, masked, rms, format));
                    }
                }
            }
        }
        return cases.stream().map(Arguments::of);
    }

    static Stream<Arguments> formats() {
        return Stream.of(RNNFormat.values()).map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void passesGradientCheckInMultiLayerNetwork(Case c) {
        long seed = SEED + c.toString().hashCode();
        Random rnd = new Random(seed);
        MultiLayerNetwork net = LayerNormNetworks.mln(DataType.DOUBLE, new NoOp(), seed,
                LayerNormNetworks.norm(WIDTH, c.rms(), c.format()).build());
        LayerNormNetworks.randomiseNorms(rnd, net, "0_");

        boolean ok = GradientChecks.passes(net, rnd, c.format(), c.minibatch(), WIDTH, N, c.masked());

        assertTrue(ok, "gradient check failed for " + c + ", seed " + seed);
    }

    /** LayerNorm over RMSNorm and RMSNorm over LayerNorm: the lower norm's gradients need the upper one's dL/dx. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("formats")
    void passesGradientCheckWhenStackedSoInputGradientIsChecked(RNNFormat format) {
        for (boolean lowerRms : new boolean[] {false, true}) {
            long seed = SEED + 31 + format.ordinal() + (lowerRms ? 2 : 0);
            Random rnd = new Random(seed);
            MultiLayerNetwork net = LayerNormNetworks.mln(DataType.DOUBLE, new NoOp(), seed,
                    LayerNormNetworks.norm(WIDTH, lowerRms, format).build(),
                    LayerNormNetworks.norm(WIDTH, !lowerRms, format).eps(1e-3).build());
            LayerNormNetworks.randomiseNorms(rnd, net, "0_", "1_");

            boolean ok = GradientChecks.passes(net, rnd, format, 3, WIDTH, N, true);

            assertTrue(ok, "gradient check failed for stacked norms, lower rms " + lowerRms + ", " + format
                    + ", seed " + seed);
        }
    }

    @Test
    void passesGradientCheckInComputationGraphWithMask() {
        long seed = SEED + 35;
        Random rnd = new Random(seed);
        ComputationGraph net = LayerNormNetworks.graph(LayerNormNetworks.norm(WIDTH, true, RNNFormat.NWC).build(),
                DataType.DOUBLE, new NoOp(), seed);
        LayerNormNetworks.randomiseNorms(rnd, net, "norm_");

        boolean ok = GradientChecks.passes(net, rnd, RNNFormat.NWC, 3, WIDTH, N, true);

        assertTrue(ok, "gradient check failed for ComputationGraph, seed " + seed);
    }

    /**
     * Norm, causal attention, residual add and final norm: the final norm's dL/dx reaches the attention's and the
     * first norm's parameters through both branches of the residual.
     */
    @Test
    void passesGradientCheckInPreNormResidualBlockWithMask() {
        long seed = SEED + 36;
        Random rnd = new Random(seed);
        ComputationGraph net = LayerNormNetworks.preNormBlock(DataType.DOUBLE, seed, WIDTH);
        LayerNormNetworks.randomiseNorms(rnd, net, "norm1_", "final_");

        boolean ok = GradientChecks.passes(net, rnd, RNNFormat.NCW, 3, WIDTH, N, true);

        assertTrue(ok, "gradient check failed for the pre-norm block, seed " + seed);
    }
}
