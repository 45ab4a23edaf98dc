package org.attn4j.ops.samediff;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Collections;
import java.util.Map;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Finite-difference gradient checks ({@link GradientCheckGraph}: float64, eps 1e-6, max relative error 1e-5) of the
 * flash and linear {@link SDAttention} functions inside a SameDiff graph, with a loss that weights each output element
 * differently so no gradient is trivially symmetric; plus the forward values against the ops they wrap. RoPE's are
 * in {@link SDRopeGradientCheckTest}.
 */
class SDAttentionGradientCheckTest {

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

    private static void flashCase(String what, long seed, int h, int hkv, int n, boolean causal, int window,
                                  boolean padded, boolean lseInLoss) {
        GradientCheckGraph g = GradientCheckGraph.of(seed, 2, h, hkv, n, 4);
        SDAttention.Flash f = SDAttention.flash(g.q(), g.k(), g.v()).causal(causal).window(window);
        INDArray pad = null;
        if (padded) {
            pad = Nd4j.ones(DataType.DOUBLE, 2, n);
            pad.putScalar(new long[] {1, n - 1}, 0.0);
            pad.putScalar(new long[] {1, n - 2}, 0.0);
            f.keyPadding(g.sd().constant("pad", pad));
        }
        SDVariable[] out = f.buildWithLse("attn");
        Map<String, INDArray> values = g.sd().output(Collections.emptyMap(), "attn", "attn_lse");
        AttentionOutput ref = FlashAttention.defaults().forward(g.q().getArr(), g.k().getArr(), g.v().getArr(),
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
            GradientCheckGraph g = GradientCheckGraph.of(31, 2, 4, 2, n, 4);
            SDAttention.Flash f = SDAttention.flash(g.q(), g.k(), g.v()).causal(true).documents(g.sd().constant("ids", ids));
            INDArray pad = Nd4j.ones(DataType.DOUBLE, 2, n);
            pad.putScalar(new long[] {0, 1}, 0.0);
            if (padded) {
                f.keyPadding(g.sd().constant("pad", pad));
            }
            SDVariable[] out = f.buildWithLse("attn");
            Map<String, INDArray> values = g.sd().output(Collections.emptyMap(), "attn", "attn_lse");
            AttentionOutput ref = FlashAttention.defaults().forward(g.q().getArr(), g.k().getArr(), g.v().getArr(),
                    AttentionMask.builder().causal(true).keyPadding(padded ? pad : null).documents(docs).build());
            assertEquals(0.0, values.get("attn").sub(ref.output()).amaxNumber().doubleValue(), 1e-12, "flash O");
            g.lossOf(out[0], null);
            g.check("flash with documents" + (padded ? " and key padding" : ""));
        }
        GradientCheckGraph g = GradientCheckGraph.of(32, 2, 2, 2, n, 3);
        SDVariable[] out = SDAttention.linear(g.q(), g.k(), g.v()).causal(true).decay(g.sd().var("lambda",
                Nd4j.createFromArray(0.8, 0.9))).documents(g.sd().constant("ids", ids)).buildWithState("lin");
        Map<String, INDArray> values = g.sd().output(Collections.emptyMap(), "lin", "lin_kv");
        var ref = LinearAttention.defaults().forward(g.q().getArr(), g.k().getArr(), g.v().getArr(), Decay.perHead(0.8, 0.9),
                true, null, docs);
        assertEquals(0.0, values.get("lin").sub(ref.output()).amaxNumber().doubleValue(), 1e-12, "linear O");
        g.lossOf(out[0], out[1]);
        g.check("linear with documents and a learned decay");
    }

    @Test
    void flashGradientsIncludeTheLseOutput() {
        flashCase("flash with LSE in the loss", 17, 2, 2, 5, true, 0, false, true);
    }

    private static void linearCase(String what, long seed, int h, int hkv, boolean causal, Decay decay,
                                   boolean learnedDecay, boolean state) {
        int n = 9;
        int d = 3;
        GradientCheckGraph g = GradientCheckGraph.of(seed, 2, h, hkv, n, d);
        SDAttention.Linear f = SDAttention.linear(g.q(), g.k(), g.v()).causal(causal);
        INDArray lambda = null;
        if (learnedDecay) {
            lambda = Nd4j.createFromArray(decay.values()).castTo(DataType.DOUBLE);
            f.decay(g.sd().var("lambda", lambda.dup()));
        } else {
            f.decay(decay);
        }
        SDVariable kv = null;
        if (state) {
            kv = g.sd().var("kvIn", Nd4j.randn(DataType.DOUBLE, 2, h, d, d).muli(0.3));
            f.kvIn(kv);
        }
        SDVariable[] out = f.buildWithState("lin");
        Map<String, INDArray> values = g.sd().output(Collections.emptyMap(), "lin", "lin_kv");
        var ref = LinearAttention.defaults().forward(g.q().getArr(), g.k().getArr(), g.v().getArr(), decay, causal,
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
