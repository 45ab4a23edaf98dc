package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.PositionalNetworks.positional;
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
 * DL4J numerical gradient checks of {@link PositionalEmbeddingLayer} in double precision (STYLE.md, "Tests"; see
 * {@link GradientChecks}), on sequences of {@link #N} steps shorter than {@link #MAX_LENGTH}, so that the rows of
 * {@code P} no step uses are checked to get no gradient. The layer sits between an attention layer and the output
 * layer, so the epsilon it passes down is checked too.
 */
class PositionalEmbeddingLayerGradientCheckTest {

    private static final int N_IN = 5;
    private static final int WIDTH = 4;
    private static final int N = 6;
    private static final int MAX_LENGTH = 9;

    /** One data setting. */
    record Case(int minibatch, boolean masked, RNNFormat format) {
        @Override
        public String toString() {
            return "mb=" + minibatch + (masked ? " masked" : "") + " " + format;
        }
    }

    static Stream<Arguments> cases() {
        List<Case> cases = new ArrayList<>();
        for (RNNFormat format : new RNNFormat[] {RNNFormat.NCW, RNNFormat.NWC}) {
            for (int mb = 1; mb <= 3; mb++) {
                for (boolean masked : new boolean[] {false, true}) {
                    cases.add(new Case(mb, masked, format));
                }
            }
        }
        return cases.stream().map(Arguments::of);
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void passesGradientCheckBelowTheOutputLayerAndAboveAttention(Case c) {
        long seed = SEED + c.toString().hashCode();
        MultiLayerNetwork net = new MultiLayerNetwork(LayerTestSupport.network(DataType.DOUBLE, new NoOp(), seed)
                .list()
                .layer(LayerTestSupport.attention(N_IN, WIDTH, 2).causal(true).dataFormat(c.format()).build())
                .layer(positional(WIDTH, MAX_LENGTH).initStd(0.5).dataFormat(c.format()).build())
                .layer(PositionalNetworks.outputLayer(positional(WIDTH, MAX_LENGTH).dataFormat(c.format()).build()))
                .build());
        net.init();

        boolean ok = GradientChecks.passes(net, new Random(seed), c.format(), c.minibatch(), N_IN, N, c.masked());

        assertTrue(ok, "gradient check failed for " + c + ", seed " + seed);
    }

    @Test
    void passesGradientCheckInComputationGraphWithMask() {
        long seed = SEED + 11;
        ComputationGraph net = PositionalNetworks.graph(positional(N_IN, MAX_LENGTH).initStd(0.5).build(),
                DataType.DOUBLE, new NoOp(), seed);

        boolean ok = GradientChecks.passes(net, new Random(seed), RNNFormat.NCW, 3, N_IN, N, true);

        assertTrue(ok, "gradient check failed for ComputationGraph, seed " + seed);
    }
}
