package org.attn4j.ops.samediff;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;

import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.SpecifiedIndex;

/**
 * Rotary embeddings in SameDiff graphs, in float64: the flash function's RoPE and {@code SDAttention.rope} at shard
 * positions against {@link RotaryEmbedding} itself, with their gradients against finite differences
 * ({@link GradientCheckGraph}), for rotate-half, partial interleaved YaRN and dynamic NTK scaling; and a graph with
 * RoPE through save and load.
 */
class SDRopeGradientCheckTest {

    private static DataType savedType;
    private static DataType savedFloatType;

    @BeforeAll
    static void useDouble() {
        savedType = Nd4j.dataType();
        savedFloatType = Nd4j.defaultFloatingPointType();
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    @AfterAll
    static void restore() {
        Nd4j.setDefaultDataTypes(savedType, savedFloatType);
    }

    /** The embeddings of the RoPE cases: rotate-half at theta 10^4; partial interleaved YaRN; dynamic NTK. */
    private static List<RotaryEmbedding> ropes() {
        return List.of(RotaryEmbedding.of(10_000),
                RotaryEmbedding.builder().theta(500).partialRotaryFactor(0.5).layout(RotaryEmbedding.Layout.INTERLEAVED)
                        .scaling(RotaryEmbedding.Scaling.YARN, 4).originalMaxPositions(4).build(),
                RotaryEmbedding.builder().theta(100).scaling(RotaryEmbedding.Scaling.DYNAMIC, 2).maxPositions(4)
                        .build());
    }

    /**
     * RoPE in the flash function: O equals the op on q and k rotated by {@link RotaryEmbedding} itself (positions 0
     * to N-1), and the gradients of q, k, v through the rotation match finite differences, for each scaling.
     */
    @Test
    void flashWithRopeEqualsRotatingFirstAndMatchesFiniteDifferences() {
        int n = 7;
        for (RotaryEmbedding rope : ropes()) {
            GradientCheckGraph g = GradientCheckGraph.of(41, 2, 4, 2, n, 8);
            SDVariable out = SDAttention.flash(g.q(), g.k(), g.v()).causal(true).rope(rope).build("attn");
            INDArray got = g.sd().output(Collections.emptyMap(), "attn").get("attn");
            RotaryEmbedding.Table t = rope.table(8, new int[][] {IntStream.range(0, n).toArray()}, n);
            AttentionOutput ref = FlashAttention.defaults().forward(rope.rotate(g.q().getArr(), t),
                    rope.rotate(g.k().getArr(), t), g.v().getArr(), AttentionMask.causal());
            assertEquals(0.0, got.sub(ref.output()).amaxNumber().doubleValue(), 1e-12, rope + " O");
            g.lossOf(out, null);
            g.check("flash with " + rope);
        }
    }

    /**
     * A shard's rotation: at global positions (one row, or one per sequence) with the whole sequence's length for
     * dynamic scaling, {@code SDAttention.rope} gives those rows of the whole sequence's rotation; its gradient
     * matches finite differences; positions of another shape are refused in one line.
     */
    @Test
    void ropeAtGlobalPositionsEqualsThoseRowsOfTheWholeSequence() {
        int n = 8;
        int[] shard = {2, 3, 6, 7};                        // zigzag's second worker of two
        for (RotaryEmbedding rope : ropes()) {
            Nd4j.getRandom().setSeed(43);
            INDArray whole = Nd4j.randn(DataType.DOUBLE, 2, 3, n, 8);
            INDArray expected = rope.rotate(whole, rope.table(8, new int[][] {IntStream.range(0, n).toArray()}, n))
                    .get(NDArrayIndex.all(), NDArrayIndex.all(), new SpecifiedIndex(2, 3, 6, 7), NDArrayIndex.all());
            SameDiff sd = SameDiff.create();
            SDVariable x = sd.var("x", whole.get(NDArrayIndex.all(), NDArrayIndex.all(), new SpecifiedIndex(2, 3, 6, 7),
                    NDArrayIndex.all()).dup());
            SDVariable shared = SDAttention.rope(x, rope).positions(sd.constant(Nd4j.createFromArray(shard)))
                    .sequenceLength(n).build("shared");
            SDVariable perRow = SDAttention.rope(x, rope).positions(sd.constant(Nd4j.createFromArray(
                    new long[][] {{2, 3, 6, 7}, {2, 3, 6, 7}}))).sequenceLength(n).build("rows");
            Map<String, INDArray> got = sd.output(Collections.emptyMap(), "shared", "rows");
            assertEquals(0.0, got.get("shared").sub(expected).amaxNumber().doubleValue(), 1e-12, rope + " shared");
            assertEquals(0.0, got.get("rows").sub(expected).amaxNumber().doubleValue(), 1e-12, rope + " per row");
            new GradientCheckGraph(sd, x, x, x).lossOf(shared, perRow);
            new GradientCheckGraph(sd, x, x, x).check("rope at shard positions, " + rope);
        }
        SameDiff sd = SameDiff.create();
        SDVariable x = sd.var("x", Nd4j.randn(DataType.DOUBLE, 1, 1, 4, 8));
        SDAttention.rope(x, RotaryEmbedding.of(10_000)).positions(sd.constant(Nd4j.createFromArray(0, 1, 2)))
                .build("bad");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> sd.output(Collections.emptyMap(), "bad"));
        assertTrue(e.getMessage().contains("positions must be integers [4]"), e.getMessage());
    }

    /** A graph with RoPE in its flash function saves and loads with the same output. */
    @Test
    void aGraphWithRopeSurvivesSaveAndLoad(@TempDir Path dir) throws Exception {
        RotaryEmbedding rope = ropes().get(1);
        GradientCheckGraph g = GradientCheckGraph.of(45, 1, 2, 2, 6, 8);
        SDAttention.flash(g.q(), g.k(), g.v()).causal(true).rope(rope).build("attn");
        INDArray before = g.sd().output(Collections.emptyMap(), "attn").get("attn");
        File f = dir.resolve("rope.sd").toFile();
        g.sd().save(f, false);
        SameDiff loaded = SDAttention.load(f, false);
        assertEquals(0.0, loaded.output(Collections.emptyMap(), "attn").get("attn").sub(before).amaxNumber()
                .doubleValue(), 0.0);
    }
}
