package org.attn4j.samples.bench;

import java.util.Arrays;
import java.util.Random;

/**
 * How time per token changes with the sequence length, fitted to every round at once: the least-squares line
 * through {@code ln(time per token)} against {@code log2(N)}, read as the relative change from the smallest to
 * the largest N, with a percentile bootstrap interval over rounds.
 *
 * <p>Why beside the max/min of per-N medians: on a shared VM whose speed swings by half from one second to the
 * next, each N's median over 15 rounds is still off by several percent, and the max/min over nine N adds up the
 * worst of those errors, so it exceeds 1 even for an op whose cost per token does not change with N. The fitted
 * line uses all rounds of all N together and answers the question the flat-time target asks: does a token cost
 * more when the sequence is longer? Its interval says how well this run could tell.
 *
 * @param change relative change of time per token from the smallest to the largest N (0.10 = 10 % more)
 * @param low    lower end of the 90 % bootstrap interval of {@code change}
 * @param high   upper end of that interval
 */
public record SizeTrend(double change, double low, double high) {

    private static final int RESAMPLES = 2000;

    /**
     * Fits the trend.
     *
     * @param n      the sequence lengths, at least two distinct
     * @param values per length, one time per token per round (any unit, or a ratio to a reference); every
     *               entry positive, each length with at least one round
     * @param seed   seed of the bootstrap's resampling, so a report can be recomputed
     * @throws IllegalArgumentException on fewer than two distinct lengths, an empty list or a non-positive value
     */
    public static SizeTrend fit(int[] n, double[][] values, long seed) {
        if (n.length != values.length) {
            throw new IllegalArgumentException("SizeTrend: " + n.length + " lengths but " + values.length
                    + " value lists");
        }
        double[] x = new double[n.length];
        double[][] y = new double[n.length][];
        for (int i = 0; i < n.length; i++) {
            if (n[i] < 1 || values[i].length == 0) {
                throw new IllegalArgumentException("SizeTrend: N = " + n[i] + " with " + values[i].length
                        + " rounds; need N >= 1 and at least one round");
            }
            x[i] = Math.log(n[i]) / Math.log(2);
            y[i] = new double[values[i].length];
            for (int r = 0; r < values[i].length; r++) {
                if (!(values[i][r] > 0) || Double.isInfinite(values[i][r])) {
                    throw new IllegalArgumentException("SizeTrend: value " + values[i][r] + " at N = " + n[i]
                            + "; expected a positive finite time");
                }
                y[i][r] = Math.log(values[i][r]);
            }
        }
        double span = Arrays.stream(x).max().orElseThrow() - Arrays.stream(x).min().orElseThrow();
        if (span == 0) {
            throw new IllegalArgumentException("SizeTrend: all lengths are equal; a trend needs two distinct N");
        }
        double change = Math.expm1(slope(x, y) * span);
        Random random = new Random(seed);
        double[] boot = new double[RESAMPLES];
        double[][] sample = new double[y.length][];
        for (int b = 0; b < RESAMPLES; b++) {
            for (int i = 0; i < y.length; i++) {
                sample[i] = new double[y[i].length];
                for (int r = 0; r < y[i].length; r++) {
                    sample[i][r] = y[i][random.nextInt(y[i].length)];
                }
            }
            boot[b] = Math.expm1(slope(x, sample) * span);
        }
        Arrays.sort(boot);
        return new SizeTrend(change, boot[(int) (0.05 * RESAMPLES)], boot[(int) (0.95 * RESAMPLES) - 1]);
    }

    /** Least-squares slope of every (x[i], y[i][r]) point. */
    private static double slope(double[] x, double[][] y) {
        double sx = 0;
        double sy = 0;
        int count = 0;
        for (int i = 0; i < x.length; i++) {
            for (double v : y[i]) {
                sx += x[i];
                sy += v;
                count++;
            }
        }
        double mx = sx / count;
        double my = sy / count;
        double sxy = 0;
        double sxx = 0;
        for (int i = 0; i < x.length; i++) {
            for (double v : y[i]) {
                sxy += (x[i] - mx) * (v - my);
                sxx += (x[i] - mx) * (x[i] - mx);
            }
        }
        return sxy / sxx;
    }
}
