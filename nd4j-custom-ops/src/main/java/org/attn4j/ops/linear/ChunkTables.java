package org.attn4j.ops.linear;

/**
 * Per-head decay tables for one chunk length {@code c} (LASP algorithm 2, lines 4-5), built once per
 * call and read by every thread:
 * <pre>
 *   mask[i][j] = lambda^(i-j) for i >= j, else 0      (intra-chunk decay mask M, row-major)
 *   in[r]      = lambda^(r+1)                         (weight of the incoming state at row r: Lambda)
 *   out[j]     = lambda^(c-1-j)                       (weight of row j in the outgoing state)
 *   whole      = lambda^c                             (decay of a state across the chunk)
 * </pre>
 * {@code out} replaces LASP's {@code lambda^C Lambda^-1}, which divides by tiny powers for small lambda.
 * The {@code *Slope} members are the derivatives with respect to lambda, for a learned decay.
 */
final class ChunkTables {

    final double[] mask;
    final double[] in;
    final double[] out;
    final double whole;
    /** {@code (i-j) lambda^(i-j-1)} for {@code i > j}, else 0: d mask / d lambda. */
    final double[] maskSlope;
    /** {@code (r+1) lambda^r}: d in[r] / d lambda. */
    final double[] inSlope;
    /** {@code (c-1-j) lambda^(c-2-j)}: d out[j] / d lambda. */
    final double[] outSlope;
    /** {@code c lambda^(c-1)}: d whole / d lambda. */
    final double wholeSlope;

    ChunkTables(double lambda, int c) {
        double[] pow = new double[c + 1];
        pow[0] = 1.0;
        for (int r = 1; r <= c; r++) {
            pow[r] = pow[r - 1] * lambda;
        }
        mask = new double[c * c];
        maskSlope = new double[c * c];
        in = new double[c];
        out = new double[c];
        inSlope = new double[c];
        outSlope = new double[c];
        for (int i = 0; i < c; i++) {
            for (int j = 0; j <= i; j++) {
                mask[i * c + j] = pow[i - j];
                maskSlope[i * c + j] = j < i ? (i - j) * pow[i - j - 1] : 0.0;
            }
            in[i] = pow[i + 1];
            out[i] = pow[c - 1 - i];
            inSlope[i] = (i + 1) * pow[i];
            outSlope[i] = i < c - 1 ? (c - 1 - i) * pow[c - 2 - i] : 0.0;
        }
        whole = pow[c];
        wholeSlope = c * pow[c - 1];
    }
}
