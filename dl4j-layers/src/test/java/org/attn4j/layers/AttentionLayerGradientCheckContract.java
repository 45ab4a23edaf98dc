package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Random;

import org.attn4j.ops.Documents;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
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

        /**
         * Whether each packed document's output is what the document gives alone (not so where positions run on
         * through the packed sequence, as RoPE's do unless they restart per document).
         */
        default boolean documentsStandAlone() {
            return true;
        }
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

    /**
     * Three sequences of {@link #N} steps packed with documents (the third with padding at its end): ids by
     * position, as {@link PackedSequences} takes them.
     */
    static Documents packed() {
        return Documents.of(new int[][] {{0, 0, 0, 1, 1, 2}, {0, 1, 1, 1, 1, 1}, {0, 0, 1, 1, -1, -1}});
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void passesGradientCheckWithDocumentsInMultiLayerNetworkAndComputationGraph(C c) {
        assumeTrue(c.minibatch() == 3, "the packed batch has three sequences");
        long seed = SEED + 7 * c.toString().hashCode();
        try (PackedSequences.Scope s = PackedSequences.enter(packed())) {
            MultiLayerNetwork net = LayerTestSupport.mln(layer(c), DataType.DOUBLE, new NoOp(), seed);
            assertTrue(GradientChecks.passes(net, new Random(seed), c.format(), 3, nIn(), N, c.masked()),
                    "gradient check with documents failed for " + c + ", seed " + seed);
            ComputationGraph graph = LayerTestSupport.graph(layer(c), DataType.DOUBLE, new NoOp(), seed);
            assertTrue(GradientChecks.passes(graph, new Random(seed), c.format(), 3, nIn(), N, c.masked()),
                    "gradient check with documents failed for ComputationGraph " + c + ", seed " + seed);
        }
    }

    /**
     * A packed sequence's output is its documents' outputs side by side: every document of sequence 0 run on its
     * own (positions relative to it) gives the packed run's steps exactly, and padding gives nothing to the rest.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void aPackedSequenceEqualsItsDocumentsRunAlone(C c) {
        assumeTrue(c.minibatch() == 3 && !c.masked() && c.format() == RNNFormat.NCW && c.documentsStandAlone(),
                "three unmasked NCW sequences whose documents stand alone");
        long seed = SEED + 11 * c.toString().hashCode();
        MultiLayerNetwork net = LayerTestSupport.mln(layer(c), DataType.DOUBLE, new NoOp(), seed);
        INDArray x = LayerTestSupport.features(new Random(seed), DataType.DOUBLE, RNNFormat.NCW, 3, nIn(), N);
        INDArray packedOut;
        try (PackedSequences.Scope s = PackedSequences.enter(packed())) {
            packedOut = net.output(x);
        }
        int[][] documents = {{0, 3}, {3, 5}, {5, 6}};        // sequence 0: [0, 0, 0, 1, 1, 2]
        for (int[] d : documents) {
            INDArray alone = net.output(x.get(NDArrayIndex.interval(0, 1), NDArrayIndex.all(),
                    NDArrayIndex.interval(d[0], d[1])).dup());
            INDArray part = packedOut.get(NDArrayIndex.interval(0, 1), NDArrayIndex.all(),
                    NDArrayIndex.interval(d[0], d[1]));
            double err = alone.sub(part).norm2Number().doubleValue() / Math.max(1e-300, alone.norm2Number().doubleValue());
            assertTrue(err <= 1e-12, c + ": document " + d[0] + ".." + d[1] + " differs packed, relative " + err);
        }
    }

    /** Document ids of another batch or length than the input are refused in one line naming both. */
    @org.junit.jupiter.api.Test
    void documentsOfAnotherShapeAreRefusedInOneLine() {
        MultiLayerNetwork net = LayerTestSupport.mln(layer(firstCase()), DataType.DOUBLE, new NoOp(), SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.DOUBLE, RNNFormat.NCW, 2, nIn(), N);
        try (PackedSequences.Scope s = PackedSequences.enter(packed())) {
            Exception e = org.junit.jupiter.api.Assertions.assertThrows(Exception.class, () -> net.output(x));
            String m = String.valueOf(e.getMessage());
            assertTrue(m.contains("document ids must have shape [2, " + N + "] (the batch and its global positions), "
                    + "got [3, " + N + "]") && !m.contains("\n"), m);
        }
    }

    /** A case of this layer in the NCW format (for tests that need any one). */
    abstract C firstCase();

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
