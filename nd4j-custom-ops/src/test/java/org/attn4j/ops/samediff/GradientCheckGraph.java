package org.attn4j.ops.samediff;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;

import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.validation.GradCheckUtil;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A graph with q, k, v as trainable variables {@code [B, H, N, D]} / {@code [B, Hkv, N, D]} for the finite-difference
 * gradient checks of {@link SDAttention}'s functions (ND4J's {@link GradCheckUtil}, float64, eps 1e-6, max relative
 * error 1e-5).
 */
record GradientCheckGraph(SameDiff sd, SDVariable q, SDVariable k, SDVariable v) {

    private static final double EPS = 1e-6;
    private static final double MAX_REL = 1e-5;
    private static final double MIN_ABS = 1e-9;

    static GradientCheckGraph of(long seed, int b, int h, int hkv, int n, int d) {
        Nd4j.getRandom().setSeed(seed);
        SameDiff sd = SameDiff.create();
        return new GradientCheckGraph(sd, sd.var("q", Nd4j.randn(DataType.DOUBLE, b, h, n, d)),
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
