package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * DL4J numerical gradient checks of an attention layer in double precision (STYLE.md, "Tests"; see
 * {@link GradientChecks}) on sequences of {@link #N} steps. A concrete test class supplies
 * {@code static Stream<Arguments> cases()} (one {@code C} per case) and the layer of a case.
 *
 * @param <C> a layer setting
 */
abstract class AttentionLayerGradientCheckContract<C extends AttentionLayerGradientCheckContract.GradientCase> {

    static final int N = 6;

    /** What a case says about its data. */
    interface GradientCase {
        int minibatch();

        boolean masked();

        RNNFormat format();
    }

    /** Features per step of the input. */
    abstract int nIn();

    /** The layer under test with the settings of {@code c}. */
    abstract AttentionLayerBase layer(C c);

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void passesGradientCheckInMultiLayerNetwork(C c) {
        long seed = SEED + c.toString().hashCode();
        MultiLayerNetwork net = LayerTestSupport.mln(layer(c), DataType.DOUBLE, new NoOp(), seed);

        boolean ok = GradientChecks.passes(net, new Random(seed), c.format(), c.minibatch(), nIn(), N, c.masked());

        assertTrue(ok, "gradient check failed for " + c + ", seed " + seed);
    }

    /** Asserts that the layers in a row pass on three masked sequences, so passed-down epsilons are checked too. */
    void assertPassesStacked(RNNFormat format, long seed, AttentionLayerBase... layers) {
        MultiLayerNetwork net = LayerTestSupport.stack(DataType.DOUBLE, new NoOp(), seed, layers);

        boolean ok = GradientChecks.passes(net, new Random(seed), format, 3, nIn(), N, true);

        assertTrue(ok, "gradient check failed for " + layers.length + " stacked layers, " + format + ", seed " + seed);
    }

    /** Asserts that the layer of {@code c} passes in a ComputationGraph. */
    void assertPassesInComputationGraph(C c, long seed) {
        ComputationGraph net = LayerTestSupport.graph(layer(c), DataType.DOUBLE, new NoOp(), seed);

        boolean ok = GradientChecks.passes(net, new Random(seed), c.format(), c.minibatch(), nIn(), N, c.masked());

        assertTrue(ok, "gradient check failed for ComputationGraph " + c + ", seed " + seed);
    }
}
