package org.attn4j.ops.linear;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Per-head decay tables for one chunk length {@code c} (LASP algorithm 2, lines 4-5), built once per
 * call and read by every thread:
 * <pre>
 *   mask[i][j] = lambda^(i-j) for i >= j, else 0      (intra-chunk decay mask M)
 *   in[r]      = lambda^(r+1)                         (weight of the incoming state at row r: Lambda)
 *   out[j]     = lambda^(c-1-j)                       (weight of row j in the outgoing state)
 *   whole      = lambda^c                             (decay of a state across the chunk)
 * </pre>
 * {@code out} replaces LASP's {@code lambda^C Lambda^-1}, which divides by tiny powers for small lambda.
 * The {@code *Slope} members are the derivatives with respect to lambda, for a learned decay.
 */
final class ChunkTables {

    final INDArray mask;
    final INDArray in;
    final INDArray out;
    final double whole;
    /** {@code (i-j) lambda^(i-j-1)} for {@code i > j}, else 0: d mask / d lambda. */
    final INDArray maskSlope;
    /** {@code (c-1-j) lambda^(c-2-j)}: d out[j] / d lambda. */
    final double[] outSlope;
    /** {@code (r+1) lambda^r}: d in[r] / d lambda. */
    final double[] inSlope;
    /** {@code c lambda^(c-1)}: d whole / d lambda. */
    final double wholeSlope;

    ChunkTables(double lambda, int c, DataType type) {
        double[] pow = new double[c + 1];
        pow[0] = 1.0;
        for (int r = 1; r <= c; r++) {
            pow[r] = pow[r - 1] * lambda;
        }
        double[][] m = new double[c][c];
        double[][] ms = new double[c][c];
        outSlope = new double[c];
        inSlope = new double[c];
        double[] inw = new double[c];
        double[] outw = new double[c];
        for (int i = 0; i < c; i++) {
            for (int j = 0; j <= i; j++) {
                m[i][j] = pow[i - j];
                ms[i][j] = j < i ? (i - j) * pow[i - j - 1] : 0.0;
            }
            inSlope[i] = (i + 1) * pow[i];
            outSlope[i] = i < c - 1 ? (c - 1 - i) * pow[c - 2 - i] : 0.0;
            inw[i] = pow[i + 1];
            outw[i] = pow[c - 1 - i];
        }
        this.mask = Nd4j.create(m).castTo(type);
        this.in = Nd4j.createFromArray(inw).castTo(type).reshape(c, 1);
        this.out = Nd4j.createFromArray(outw).castTo(type).reshape(c, 1);
        this.whole = pow[c];
        this.maskSlope = Nd4j.create(ms).castTo(type);
        this.wholeSlope = c * pow[c - 1];
    }
}
