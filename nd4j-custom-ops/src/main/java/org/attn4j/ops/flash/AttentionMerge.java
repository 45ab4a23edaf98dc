package org.attn4j.ops.flash;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Combines two partial attention results over disjoint key sets into the result over their union
 * (BurstAttention's global attention optimisation, GAO, section 3.1; FlashAttention's online softmax).
 * Associative and commutative, so any number of partials merge in any order.
 */
public final class AttentionMerge {

    private AttentionMerge() {
    }

    /**
     * The merged {@code (O, LSE)}.
     *
     * <p>Naive form: {@code LSE = log(exp(LSE1) + exp(LSE2))}, {@code O = (exp(LSE1) O1 + exp(LSE2) O2)
     * / exp(LSE)}; it overflows for large scores. Stable form used here, with {@code M = max(LSE1, LSE2)}:
     * {@code LSE = M + log1p(exp(min - M))}, {@code O = exp(LSE1 - LSE) O1 + exp(LSE2 - LSE) O2}; every
     * exponent is {@code <= 0}. A side with LSE -inf (saw no key) weighs 0; both -inf give O 0, LSE -inf.
     *
     * @param a partial result, {@code O [B, H, N, D]}, {@code LSE [B, H, N]}
     * @param b partial result of the same shapes and type
     * @return a new merged result; the inputs are not modified
     * @throws IllegalArgumentException if shapes or types differ
     */
    public static AttentionOutput merge(AttentionOutput a, AttentionOutput b) {
        check(a, b);
        long rows = a.lse().length();
        long d = a.output().size(a.output().rank() - 1);
        double[] la = a.lse().dup('c').data().asDouble();
        double[] lb = b.lse().dup('c').data().asDouble();
        double[] lse = new double[(int) rows];
        double[] wa = new double[(int) rows];
        double[] wb = new double[(int) rows];
        for (int i = 0; i < rows; i++) {
            double x = la[i];
            double y = lb[i];
            double hi = Math.max(x, y);
            if (hi == Double.NEGATIVE_INFINITY) {
                lse[i] = Double.NEGATIVE_INFINITY;
                continue;                               // weights stay 0: nothing seen on either side
            }
            double lo = Math.min(x, y);
            lse[i] = hi + Math.log1p(Math.exp(lo - hi));
            wa[i] = Math.exp(x - lse[i]);
            wb[i] = Math.exp(y - lse[i]);
        }
        var type = a.output().dataType();
        INDArray oa = a.output().reshape('c', rows, d);
        INDArray ob = b.output().reshape('c', rows, d);
        INDArray merged = oa.mulColumnVector(Nd4j.createFromArray(wa).castTo(type).reshape(rows, 1))
                .addi(ob.mulColumnVector(Nd4j.createFromArray(wb).castTo(type).reshape(rows, 1)));
        return new AttentionOutput(merged.reshape('c', a.output().shape()),
                Nd4j.createFromArray(lse).castTo(type).reshape('c', a.lse().shape()));
    }

    private static void check(AttentionOutput a, AttentionOutput b) {
        if (!java.util.Arrays.equals(a.output().shape(), b.output().shape())
                || !java.util.Arrays.equals(a.lse().shape(), b.lse().shape())
                || a.output().dataType() != b.output().dataType()) {
            throw new IllegalArgumentException("AttentionMerge: partials differ: O "
                    + java.util.Arrays.toString(a.output().shape()) + " " + a.output().dataType() + " vs "
                    + java.util.Arrays.toString(b.output().shape()) + " " + b.output().dataType() + ", LSE "
                    + java.util.Arrays.toString(a.lse().shape()) + " vs " + java.util.Arrays.toString(b.lse().shape()));
        }
        if (a.lse().length() * a.output().size(a.output().rank() - 1) != a.output().length()) {
            throw new IllegalArgumentException("AttentionMerge: LSE " + java.util.Arrays.toString(a.lse().shape())
                    + " does not match O " + java.util.Arrays.toString(a.output().shape())
                    + "; expected LSE to be O without its last dimension");
        }
    }
}
