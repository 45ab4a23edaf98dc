package org.attn4j.ops.linear;

import java.util.Arrays;

/**
 * The decay rate {@code lambda} of causal linear attention, one value for every head or one per query
 * head, each in {@code (0, 1]}; {@code lambda = 1} is the plain linear transformer (LASP, section 2.2,
 * equation 4: {@code o_s = q_s^T sum_{i<=s} lambda^(s-i) k_i v_i^T}).
 */
public final class Decay {

    private static final Decay NONE = new Decay(new double[] {1.0});

    private final double[] lambdas;

    private Decay(double[] lambdas) {
        this.lambdas = lambdas;
    }

    /** No decay: {@code lambda = 1} for every head. */
    public static Decay none() {
        return NONE;
    }

    /**
     * The same rate for every head.
     *
     * @throws IllegalArgumentException unless {@code 0 < lambda <= 1}
     */
    public static Decay of(double lambda) {
        return perHead(lambda);
    }

    /**
     * One rate per query head (or a single value for all heads).
     *
     * @throws IllegalArgumentException for no values or a value outside {@code (0, 1]}
     */
    public static Decay perHead(double... lambdas) {
        if (lambdas == null || lambdas.length == 0) {
            throw new IllegalArgumentException("Decay: expected at least one lambda, got none");
        }
        for (int h = 0; h < lambdas.length; h++) {
            double l = lambdas[h];
            if (!(l > 0.0 && l <= 1.0)) {
                throw new IllegalArgumentException("Decay: lambda must be in (0, 1], got " + l
                        + (lambdas.length > 1 ? " for head " + h : ""));
            }
        }
        return new Decay(lambdas.clone());
    }

    /**
     * TransNormerLLM's fixed per-head slopes: head {@code h} of {@code H} decays with
     * {@code lambda_h = exp(-2^(-8 (h + 1) / H))}, so early heads forget fast and late heads slowly.
     */
    public static Decay transNormerSlopes(int heads) {
        if (heads < 1) {
            throw new IllegalArgumentException("Decay: heads must be >= 1, got " + heads);
        }
        double[] l = new double[heads];
        for (int h = 0; h < heads; h++) {
            l[h] = Math.exp(-Math.pow(2.0, -8.0 * (h + 1) / heads));
        }
        return new Decay(l);
    }

    /** The rate of query head {@code h}. */
    public double lambda(int h) {
        return lambdas.length == 1 ? lambdas[0] : lambdas[h];
    }

    /** The number of values given: 1 (shared) or one per head. */
    public int size() {
        return lambdas.length;
    }

    /** Whether every rate is exactly 1. */
    public boolean isNone() {
        for (double l : lambdas) {
            if (l != 1.0) {
                return false;
            }
        }
        return true;
    }

    /** A copy of the rates. */
    public double[] values() {
        return lambdas.clone();
    }

    void checkHeads(String op, int heads) {
        if (lambdas.length != 1 && lambdas.length != heads) {
            throw new IllegalArgumentException(op + ": " + lambdas.length + " decay values for " + heads
                    + " query heads; expected 1 or " + heads);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Decay d && Arrays.equals(lambdas, d.lambdas);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(lambdas);
    }

    @Override
    public String toString() {
        return "Decay" + Arrays.toString(lambdas);
    }
}
