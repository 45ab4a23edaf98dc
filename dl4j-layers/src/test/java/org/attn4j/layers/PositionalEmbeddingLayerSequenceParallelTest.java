package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertFailsWith;
import static org.attn4j.layers.PositionalNetworks.positional;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.Random;
import java.util.function.Supplier;
import java.util.stream.Stream;

import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * With a {@link SequenceParallel} context entered on the thread, the layer embeds each local step at the global
 * position the context gives it (zigzag, striped or any order), its gradient lands on exactly those rows of
 * {@code P}, and steps or positions that do not fit fail with a message naming the layer and the numbers.
 */
class PositionalEmbeddingLayerSequenceParallelTest {

    private static final int WIDTH = 3;
    private static final int MB = 2;
    private static final int MAX_LENGTH = 16;

    /** A context that knows its positions only: this layer never asks for an attention algorithm. */
    private record FixedPositions(int length, int[] held) implements SequenceParallel.Context {
        @Override
        public int[] positions() {
            return held.clone();
        }

        @Override
        public SequenceParallelAttention<?> softmax(boolean causal, int window) {
            throw new UnsupportedOperationException("a positional embedding needs no attention");
        }

        @Override
        public SequenceParallelLinearAttention<?> linear(LinearAttention op, Decay decay, boolean causal) {
            throw new UnsupportedOperationException("a positional embedding needs no attention");
        }
    }

    /** Worker 0 of 2 zigzag, worker 1 of 4 striped, and an arbitrary order, N = 16; NCW and NWC, masked or not. */
    static Stream<Arguments> cases() {
        int[][] held = {{0, 1, 2, 3, 12, 13, 14, 15}, {1, 5, 9, 13}, {9, 2, 14, 0, 7}};
        String[] names = {"zigzag 0/2", "striped 1/4", "any order"};
        Stream.Builder<Arguments> out = Stream.builder();
        for (int i = 0; i < held.length; i++) {
            out.add(Arguments.of(names[i], held[i], RNNFormat.NCW, false));
            out.add(Arguments.of(names[i], held[i], RNNFormat.NWC, true));
        }
        return out.build();
    }

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @ParameterizedTest(name = "{0} {2} masked={3}")
    @MethodSource("cases")
    void addsTheRowsAtTheContextsPositionsAndSendsTheGradientThere(String name, int[] held, RNNFormat format,
                                                                 boolean masked) {
        long seed = SEED + name.hashCode() + format.ordinal();
        Random rnd = new Random(seed);
        MultiLayerNetwork net = PositionalNetworks.alone(positional(WIDTH, MAX_LENGTH).initStd(1.0)
                .dataFormat(format).build(), DataType.DOUBLE, seed);
        INDArray p = net.getParam("0_P").dup();
        int n = held.length;
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, format, MB, WIDTH, n);
        INDArray eps = LayerTestSupport.features(rnd, DataType.DOUBLE, format, MB, WIDTH, n);
        INDArray mask = masked ? LayerTestSupport.endPaddingMask(DataType.DOUBLE, MB, n) : null;
        String what = name + " " + Arrays.toString(held) + " " + format + (masked ? " masked" : "") + ", seed " + seed;

        PositionalNetworks.Pass pass = inContext(new FixedPositions(MAX_LENGTH, held),
                () -> PositionalNetworks.Pass.of(net, x, mask, eps));

        assertEmbeddedAt(held, p, x, mask, eps, format, pass, what);
    }

    /** The training forward's positions serve its backward even when the context is gone by then. */
    @Test
    void backpropUsesThePositionsOfItsForwardAfterTheScopeCloses() {
        int[] held = {1, 5, 9, 13};
        Random rnd = new Random(SEED);
        MultiLayerNetwork net = PositionalNetworks.alone(positional(WIDTH, MAX_LENGTH).build(), DataType.DOUBLE,
                SEED);
        INDArray p = net.getParam("0_P").dup();
        INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, RNNFormat.NCW, MB, WIDTH, held.length);
        INDArray eps = LayerTestSupport.features(rnd, DataType.DOUBLE, RNNFormat.NCW, MB, WIDTH, held.length);
        Layer layer = net.getLayer(0);

        INDArray out = inContext(new FixedPositions(MAX_LENGTH, held),
                () -> layer.activate(x, true, LayerWorkspaceMgr.noWorkspaces()).dup());
        INDArray dP = layer.backpropGradient(eps, LayerWorkspaceMgr.noWorkspaces()).getFirst()
                .getGradientFor(PositionalEmbeddingParamInitializer.P);

        INDArray dx = eps.dup();
        assertEmbeddedAt(held, p, x, null, eps, RNNFormat.NCW, new PositionalNetworks.Pass(out, dx, dP),
                "striped 1/4, backprop outside the scope");
    }

    @Test
    void rejectsAShardWhoseStepCountDiffersFromTheContextsPositions() {
        MultiLayerNetwork net = PositionalNetworks.alone(positional(WIDTH, MAX_LENGTH).name("wpe").build(),
                DataType.DOUBLE, SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.DOUBLE, RNNFormat.NCW, MB, WIDTH, 5);

        SequenceParallel.Context c = new FixedPositions(16, new int[] {0, 1, 14, 15});
        assertFailsWith(DL4JInvalidInputException.class, () -> inContext(c, () -> net.output(x)),
                "PositionalEmbeddingLayer", "wpe", "input has 5 time steps", "holds 4 positions of N = 16");
    }

    @Test
    void rejectsAContextPositionAtOrBeyondMaxLength() {
        MultiLayerNetwork net = PositionalNetworks.alone(positional(WIDTH, MAX_LENGTH).name("wpe").build(),
                DataType.DOUBLE, SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.DOUBLE, RNNFormat.NCW, MB, WIDTH, 2);

        SequenceParallel.Context c = new FixedPositions(32, new int[] {3, 19});
        assertFailsWith(DL4JInvalidInputException.class, () -> inContext(c, () -> net.output(x)),
                "PositionalEmbeddingLayer", "wpe", "time step 1 is at position 19", "maxLength is 16", "N = 32");
    }

    @Test
    void rejectsASequenceLongerThanMaxLengthOnOneDevice() {
        MultiLayerNetwork net = PositionalNetworks.alone(positional(WIDTH, 8).name("wpe").dataFormat(RNNFormat.NWC)
                .build(), DataType.DOUBLE, SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.DOUBLE, RNNFormat.NWC, MB, WIDTH, 9);

        assertFailsWith(DL4JInvalidInputException.class, () -> net.output(x), "PositionalEmbeddingLayer", "wpe",
                "time step 8 is at position 8", "maxLength is 8", "sequences of 9 steps need maxLength >= 9");
    }

    /** {@code body}'s result with {@code c} entered on this thread, the thread's context restored after. */
    private static <T> T inContext(SequenceParallel.Context c, Supplier<T> body) {
        SequenceParallel.Scope scope = SequenceParallel.enter(c);
        try {
            return body.get();
        } finally {
            scope.close();
        }
    }

    /**
     * Asserts {@code out[b][t] = x[b][t] + m[b][t] P[held[t]]}, {@code dx = eps}, and that row {@code held[t]} of
     * dP is {@code sum_b m[b][t] eps[b][t]} and every other row is 0.
     */
    private static void assertEmbeddedAt(int[] held, INDArray p, INDArray x, INDArray mask, INDArray eps,
                                         RNNFormat format, PositionalNetworks.Pass pass, String what) {
        double[][][] expected = new double[MB][held.length][WIDTH];
        double[][] expectedDp = new double[MAX_LENGTH][WIDTH];
        for (int b = 0; b < MB; b++) {
            for (int t = 0; t < held.length; t++) {
                double m = mask == null ? 1 : mask.getDouble(b, t);
                for (int f = 0; f < WIDTH; f++) {
                    expected[b][t][f] = NaiveMath.at(x, format, b, t, f) + m * p.getDouble(held[t], f);
                    expectedDp[held[t]][f] += m * NaiveMath.at(eps, format, b, t, f);
                }
            }
        }
        NaiveMath.assertMatches(expected, pass.output(), format, 1e-12, what);
        LayerTestSupport.assertIdentical(eps, pass.inputGradient(), "dL/dx, " + what);
        for (int r = 0; r < MAX_LENGTH; r++) {
            for (int f = 0; f < WIDTH; f++) {
                assertEquals(expectedDp[r][f], pass.tableGradient().getDouble(r, f), 1e-12,
                        "dL/dP[" + r + ", " + f + "], " + what);
            }
        }
    }
}
