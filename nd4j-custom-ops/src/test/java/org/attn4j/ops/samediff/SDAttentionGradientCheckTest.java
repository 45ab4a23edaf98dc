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

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.validation.GradCheckUtil;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.SpecifiedIndex;

/**
 * Finite-difference gradient checks (ND4J's {@link GradCheckUtil}, float64, eps 1e-6, max relative error 1e-5) of
 * every {@link SDAttention} function inside a SameDiff graph, with a loss that weights each output element
 * differently so no gradient is trivially symmetric; plus the forward values against the ops they wrap.
 */
class SDAttentionGradientCheckTest {

    private static final double EPS = 1e-6;
    private static final double MAX_REL = 1e-5;
    private static final double MIN_ABS = 1e-9;

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

    /** A graph with q, k, v as trainable variables {@code [B, H, N, D]} / {@code [B, Hkv, N, D]}. */
    private record Graph(SameDiff sd, SDVariable q, SDVariable k, SDVariable v) {

        static Graph of(long seed, int b, int h, int hkv, int n, int d) {
            Nd4j.getRandom().setSeed(seed);
            SameDiff sd = SameDiff.create();
            return new Graph(sd, sd.var("q", Nd4j.randn(DataType.DOUBLE, b, h, n, d)),
                    sd.var("k", Nd4j.randn(DataType.DOUBLE, b, hkv, n, d)),
                    sd.var("v", Nd4j.randn(DataType.DOUBLE, b, hkv, n, d)));
        }

        /** loss = sum(out * W) + sum(second * W2) for fixed random W, W2. */
        void lossOf(SDVariable out, SDVariable second) {
            SDVariable loss = out.mul(sd.constant(Nd4j.randn(DataType.DOUBLE, out.getArr().shape()))).sum();
            if (second != null) {
                loss = loss.add(second.mul(sd.constant(Nd4j.randn(DataType.DOUBLE, second.getArr().shape()))).sum());
            }
            loss.rename("loss").markAsLoss();
        }

        void check(String what) {
            boolean ok = GradCheckUtil.checkGradients(sd, Collections.emptyMap(), EPS, MAX_REL, MIN_ABS, false, false);
            assertTrue(ok, what + ": SameDiff gradients differ from finite differences (seeded inputs)");
        }
    }

    private static void flashCase(String what, long seed, int h, int hkv, int n, boolean causal, int window,
                                  boolean padded, boolean lseInLoss) {
        Graph g = Graph.of(seed, 2, h, hkv, n, 4);
        SDAttention.Flash f = SDAttention.flash(g.q, g.k, g.v).causal(causal).window(window);
        INDArray pad = null;
        if (padded) {
            pad = Nd4j.ones(DataType.DOUBLE, 2, n);
            pad.putScalar(new long[] {1, n - 1}, 0.0);
            pad.putScalar(new long[] {1, n - 2}, 0.0);
            f.keyPadding(g.sd.constant("pad", pad));
        }
        SDVariable[] out = f.buildWithLse("attn");
        Map<String, INDArray> values = g.sd.output(Collections.emptyMap(), "attn", "attn_lse");
        AttentionOutput ref = FlashAttention.defaults().forward(g.q.getArr(), g.k.getArr(), g.v.getArr(),
                AttentionMask.builder().causal(causal).window(window).keyPadding(pad).build());
        assertEquals(0.0, values.get("attn").sub(ref.output()).amaxNumber().doubleValue(), 1e-12, what + " O");
        assertEquals(0.0, values.get("attn_lse").sub(ref.lse()).amaxNumber().doubleValue(), 1e-12, what + " LSE");
        g.lossOf(out[0], lseInLoss ? out[1] : null);
        g.check(what);
    }

    @Test
    void flashGradientsMatchFiniteDifferencesWhenCausal() {
        flashCase("flash causal", 11, 2, 2, 7, true, 0, false, false);
    }

    @Test
    void flashGradientsMatchFiniteDifferencesWhenFull() {
        flashCase("flash full", 12, 2, 2, 6, false, 0, false, false);
    }

    @Test
    void flashGradientsMatchFiniteDifferencesWithGqa() {
        flashCase("flash GQA causal", 13, 4, 2, 5, true, 0, false, false);
        flashCase("flash MQA full", 14, 2, 1, 5, false, 0, false, false);
    }

    @Test
    void flashGradientsMatchFiniteDifferencesWithPaddingAndWindow() {
        flashCase("flash key padding", 15, 2, 1, 6, false, 0, true, false);
        flashCase("flash causal window 3 + padding", 16, 2, 2, 7, true, 3, true, false);
    }

    /**
     * Packed sequences in the graph: document ids (int64, with padding) as an input; outputs equal the op with the
     * same documents, gradients match finite differences, for flash (with key padding too) and linear attention.
     */
    @Test
    void documentsAsAGraphInputMatchTheOpAndFiniteDifferences() {
        int n = 8;
        INDArray ids = Nd4j.createFromArray(new long[][] {{0, 0, 0, 1, 1, 2, 2, 2}, {0, 0, 1, 1, 1, 1, -1, -1}});
        Documents docs = Documents.of(ids);
        for (boolean padded : new boolean[] {false, true}) {
            Graph g = Graph.of(31, 2, 4, 2, n, 4);
            SDAttention.Flash f = SDAttention.flash(g.q, g.k, g.v).causal(true).documents(g.sd.constant("ids", ids));
            INDArray pad = Nd4j.ones(DataType.DOUBLE, 2, n);
            pad.putScalar(new long[] {0, 1}, 0.0);
            if (padded) {
                f.keyPadding(g.sd.constant("pad", pad));
            }
            SDVariable[] out = f.buildWithLse("attn");
            Map<String, INDArray> values = g.sd.output(Collections.emptyMap(), "attn", "attn_lse");
            AttentionOutput ref = FlashAttention.defaults().forward(g.q.getArr(), g.k.getArr(), g.v.getArr(),
                    AttentionMask.builder().causal(true).keyPadding(padded ? pad : null).documents(docs).build());
            assertEquals(0.0, values.get("attn").sub(ref.output()).amaxNumber().doubleValue(), 1e-12, "flash O");
            g.lossOf(out[0], null);
            g.check("flash with documents" + (padded ? " and key padding" : ""));
        }
        Graph g = Graph.of(32, 2, 2, 2, n, 3);
        SDVariable[] out = SDAttention.linear(g.q, g.k, g.v).causal(true).decay(g.sd.var("lambda",
                Nd4j.createFromArray(0.8, 0.9))).documents(g.sd.constant("ids", ids)).buildWithState("lin");
        Map<String, INDArray> values = g.sd.output(Collections.emptyMap(), "lin", "lin_kv");
        var ref = LinearAttention.defaults().forward(g.q.getArr(), g.k.getArr(), g.v.getArr(), Decay.perHead(0.8, 0.9),
                true, null, docs);
        assertEquals(0.0, values.get("lin").sub(ref.output()).amaxNumber().doubleValue(), 1e-12, "linear O");
        g.lossOf(out[0], out[1]);
        g.check("linear with documents and a learned decay");
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
            Graph g = Graph.of(41, 2, 4, 2, n, 8);
            SDVariable out = SDAttention.flash(g.q, g.k, g.v).causal(true).rope(rope).build("attn");
            INDArray got = g.sd.output(Collections.emptyMap(), "attn").get("attn");
            RotaryEmbedding.Table t = rope.table(8, new int[][] {IntStream.range(0, n).toArray()}, n);
            AttentionOutput ref = FlashAttention.defaults().forward(rope.rotate(g.q.getArr(), t),
                    rope.rotate(g.k.getArr(), t), g.v.getArr(), AttentionMask.causal());
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
            new Graph(sd, x, x, x).lossOf(shared, perRow);
            new Graph(sd, x, x, x).check("rope at shard positions, " + rope);
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
        Graph g = Graph.of(45, 1, 2, 2, 6, 8);
        SDAttention.flash(g.q, g.k, g.v).causal(true).rope(rope).build("attn");
        INDArray before = g.sd.output(Collections.emptyMap(), "attn").get("attn");
        File f = dir.resolve("rope.sd").toFile();
        g.sd.save(f, false);
        SameDiff loaded = SDAttention.load(f, false);
        assertEquals(0.0, loaded.output(Collections.emptyMap(), "attn").get("attn").sub(before).amaxNumber()
                .doubleValue(), 0.0);
    }

    @Test
    void flashGradientsIncludeTheLseOutput() {
        flashCase("flash with LSE in the loss", 17, 2, 2, 5, true, 0, false, true);
    }

    private static void linearCase(String what, long seed, int h, int hkv, boolean causal, Decay decay,
                                   boolean learnedDecay, boolean state) {
        int n = 9;
        int d = 3;
        Graph g = Graph.of(seed, 2, h, hkv, n, d);
        SDAttention.Linear f = SDAttention.linear(g.q, g.k, g.v).causal(causal);
        INDArray lambda = null;
        if (learnedDecay) {
            lambda = Nd4j.createFromArray(decay.values()).castTo(DataType.DOUBLE);
            f.decay(g.sd.var("lambda", lambda.dup()));
        } else {
            f.decay(decay);
        }
        SDVariable kv = null;
        if (state) {
            kv = g.sd.var("kvIn", Nd4j.randn(DataType.DOUBLE, 2, h, d, d).muli(0.3));
            f.kvIn(kv);
        }
        SDVariable[] out = f.buildWithState("lin");
        Map<String, INDArray> values = g.sd.output(Collections.emptyMap(), "lin", "lin_kv");
        var ref = LinearAttention.defaults().forward(g.q.getArr(), g.k.getArr(), g.v.getArr(), decay, causal,
                kv == null ? null : kv.getArr());
        assertEquals(0.0, values.get("lin").sub(ref.output()).amaxNumber().doubleValue(), 1e-12, what + " O");
        assertEquals(0.0, values.get("lin_kv").sub(ref.kvOut()).amaxNumber().doubleValue(), 1e-12, what + " kv");
        g.lossOf(out[0], out[1]);
        g.check(what);
    }

    @Test
    void linearGradientsMatchFiniteDifferencesWhenCausalWithDecay() {
        linearCase("linear causal decay 0.9", 21, 2, 2, true, Decay.of(0.9), false, false);
        linearCase("linear causal per-head decay, GQA", 22, 4, 2, true, Decay.perHead(0.8, 0.9, 0.95, 1.0), false,
                false);
    }

    @Test
    void linearGradientsMatchFiniteDifferencesWhenNonCausal() {
        linearCase("linear full", 23, 2, 1, false, Decay.none(), false, false);
    }

    @Test
    void linearGradientsReachTheStateAndALearnedDecay() {
        linearCase("linear learned per-head decay + state", 24, 2, 2, true, Decay.perHead(0.7, 0.9), true, true);
        linearCase("linear learned shared decay", 25, 2, 1, true, Decay.of(0.85), true, false);
        linearCase("linear full + state", 26, 2, 2, false, Decay.none(), false, true);
    }
}
