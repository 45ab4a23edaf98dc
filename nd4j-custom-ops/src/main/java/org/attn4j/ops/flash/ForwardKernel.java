package org.attn4j.ops.flash;

import org.attn4j.ops.Gemm;
import org.attn4j.ops.Scratch;
import org.attn4j.ops.Views;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * FlashAttention-2 forward for one query block of one (batch, head): the key blocks stream past with
 * the online softmax (running row max {@code m}, row sum {@code l}, unnormalised accumulator), the
 * output is normalised once at the end and {@code LSE = m + log(l)} is kept for the backward pass.
 * One instance per worker thread: it owns its tile buffers, so peak extra memory is O(tile^2).
 *
 * <p>Row bookkeeping ({@code m}, {@code l}, rescale factors) is done in Java arrays; the matrix work is
 * gemm; the element-wise step between the gemms is {@link TileMath}.
 */
final class ForwardKernel {

    private final INDArray q;
    private final INDArray k;
    private final INDArray v;
    private final INDArray out;
    private final INDArray lse;
    private final AttentionShapes s;
    private final TilePlan plan;
    private final double scale;
    private final DataType type;
    private final TileMath math;

    ForwardKernel(INDArray q, INDArray k, INDArray v, INDArray out, INDArray lse, AttentionShapes s,
                  TilePlan plan, double scale) {
        this.q = q;
        this.k = k;
        this.v = v;
        this.out = out;
        this.lse = lse;
        this.s = s;
        this.plan = plan;
        this.scale = scale;
        this.type = s.dataType();
        this.math = TileMath.forType(type);
    }

    /** Computes rows {@code qb} of head {@code h} in sequence {@code b}. */
    void run(int b, int h, int qb) {
        int d = s.headDim();
        int rows = plan.queryRows(qb);
        // Scores in the base of the tile math's powers: s log_base(e), so base^s' = e^s.
        double unit = math.base() == 2.0 ? 1.0 / Math.log(2.0) : 1.0;
        long qRow0 = ((long) b * s.heads() + h) * s.queries() + plan.queryStart(qb);
        long kRow0 = ((long) b * s.kvHeads() + h / s.group()) * s.keys();
        INDArray acc = buffer(0, rows, d);
        boolean first = true;
        double[] m = new double[rows];
        double[] l = new double[rows];
        java.util.Arrays.fill(m, Double.NEGATIVE_INFINITY);
        double[] alpha = new double[rows];
        double[] rowSum = new double[rows];

        for (int kb = 0; kb < plan.keyBlocks; kb++) {
            TilePlan.Kind kind = plan.kind(b, qb, kb);
            if (kind == TilePlan.Kind.SKIP) {
                continue;
            }
            int cols = plan.keyCols(kb);
            long kOff = (kRow0 + plan.keyStart(kb)) * d;
            INDArray scores = buffer(1, rows, cols);
            Gemm.mul(q, qRow0 * d, false, k, kOff, true, scores, 0, rows, cols, d, scale * unit, 0.0);
            if (kind == TilePlan.Kind.PARTIAL) {
                math.mask(scores, plan, b, qb, kb);
            }
            boolean rescale = math.softmaxStep(scores, rows, cols, m, alpha, rowSum);
            for (int r = 0; r < rows; r++) {
                l[r] = alpha[r] * l[r] + rowSum[r];
            }
            if (rescale && !first) {
                math.scaleRows(acc, alpha, rows, d);
            }
            // The first tile overwrites the accumulator: no zeroing pass.
            Gemm.mul(scores, 0, false, v, kOff, false, acc, 0, rows, d, cols, 1.0, first ? 0.0 : 1.0);
            first = false;
        }

        double[] inv = new double[rows];
        double[] rowLse = new double[rows];
        for (int r = 0; r < rows; r++) {
            // l = 0 only for a row that saw no key: output 0, LSE -inf. NaN stays NaN.
            inv[r] = l[r] == 0.0 ? 0.0 : 1.0 / l[r];
            rowLse[r] = l[r] == 0.0 ? Double.NEGATIVE_INFINITY : m[r] / unit + Math.log(l[r]);
        }
        if (first) {
            acc.assign(0);                              // every key block was masked away
        } else {
            math.scaleRows(acc, inv, rows, d);
        }
        Views.matrix(out, qRow0 * d, rows, d).assign(acc);
        Views.set(lse, qRow0, rowLse, rows);
    }

    private INDArray buffer(int slot, int rows, int cols) {
        return Scratch.matrix(slot, type, rows, cols);
    }

}
