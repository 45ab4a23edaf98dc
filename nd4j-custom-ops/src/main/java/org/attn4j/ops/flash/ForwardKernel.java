package org.attn4j.ops.flash;

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

    /** Rows per group when a partly masked tile is computed in parts. */
    private static final int ROW_GROUP = 128;
    /** Column runs of those groups start and end at multiples of this. */
    private static final int COLUMN_STEP = 64;

    private final INDArray q;
    private final INDArray k;
    private final INDArray v;
    private final long keyRows;
    private final INDArray out;
    private final INDArray lse;
    private final AttentionShapes s;
    private final TilePlan plan;
    private final double scale;
    private final DataType type;
    private final TileMath math;
    /** Whether the products are native ({@link NativeTileMath}) rather than {@link org.attn4j.ops.Gemm}. */
    private final boolean packed;
    /** The current key block's K^T, packed, when {@link #packed}. */
    private INDArray kt;
    /** Per row of a tile, its first visible column and one past its last (partly masked tiles, native step). */
    private int[] from = new int[0];
    private int[] to = new int[0];

    /** {@code keyRows}: rows from one K/V head to the next in k's and v's buffers (at least the number of keys). */
    ForwardKernel(INDArray q, INDArray k, INDArray v, long keyRows, INDArray out, INDArray lse, AttentionShapes s,
                  TilePlan plan, double scale, boolean packed) {
        this.q = q;
        this.k = k;
        this.v = v;
        this.keyRows = keyRows;
        this.out = out;
        this.lse = lse;
        this.s = s;
        this.plan = plan;
        this.scale = scale;
        this.type = s.dataType();
        this.math = TileMath.forType(type);
        this.packed = packed;
    }

    /** Computes rows {@code qb} of head {@code h} in sequence {@code b}. */
    void run(int b, int h, int qb) {
        int d = s.headDim();
        int rows = plan.queryRows(qb);
        // Scores in the base of the tile math's powers: s log_base(e), so base^s' = e^s.
        double unit = math.base() == 2.0 ? 1.0 / Math.log(2.0) : 1.0;
        long qRow0 = ((long) b * s.heads() + h) * s.queries() + plan.queryStart(qb);
        long kRow0 = ((long) b * s.kvHeads() + h / s.group()) * keyRows;
        INDArray acc = buffer(0, rows, d);
        boolean first = true;
        double[] m = new double[rows];
        double[] l = new double[rows];
        java.util.Arrays.fill(m, Double.NEGATIVE_INFINITY);

        for (int kb = 0; kb < plan.keyBlocks; kb++) {
            TilePlan.Kind kind = plan.kind(b, qb, kb);
            if (kind == TilePlan.Kind.SKIP) {
                continue;
            }
            int cols = plan.keyCols(kb);
            long kOff = (kRow0 + plan.keyStart(kb)) * d;
            if (packed) {
                kt = PackedTranspose.block(4, k, kOff, cols, d, plan.keyCols(0));
            }
            if (kind == TilePlan.Kind.PARTIAL && packed && plan.keysAscend(kb) && !plan.partlyPadded(b, kb)) {
                // One run of visible columns per row: the native step computes only what each group of rows sees.
                runs(b, plan.queryStart(qb), rows, kb, cols);
                NativeTileMath.intervalStep(q, qRow0 * d, kt, 0, v, kOff, acc, 0,
                        buffer(1, Math.min(rows, NativeTileMath.INTERVAL_GROUP), cols), rows, cols, d, scale * unit,
                        from, to, m, l, !first);
                first = false;
                continue;
            }
            if (kind == TilePlan.Kind.PARTIAL && plan.keysAscend(kb) && rows > ROW_GROUP) {
                // A partly masked tile (the causal diagonal, a window's edge) in groups of rows, each computing
                // only the run of columns some of its rows may see. Groups can start at different tiles, so the
                // accumulator starts from zeros here.
                if (first) {
                    acc.assign(0);
                    first = false;
                }
                int q0 = plan.queryStart(qb);
                for (int r0 = 0; r0 < rows; r0 += ROW_GROUP) {
                    int n = Math.min(ROW_GROUP, rows - r0);
                    int from = cols;
                    int to = 0;
                    for (int r = r0; r < r0 + n; r++) {
                        from = Math.min(from, plan.allowedFrom(b, q0 + r, kb));
                        to = Math.max(to, plan.allowedTo(b, q0 + r, kb));
                    }
                    // Whole multiples of 64 columns (the mask hides the extra ones): few distinct buffer sizes.
                    from = from / COLUMN_STEP * COLUMN_STEP;
                    to = Math.min(cols, (to + COLUMN_STEP - 1) / COLUMN_STEP * COLUMN_STEP);
                    if (to > from) {
                        step(b, kb, q0, qRow0, kOff, r0, n, from, to - from, true, unit, acc, m, l, 1.0);
                    }
                }
                continue;
            }
            step(b, kb, plan.queryStart(qb), qRow0, kOff, 0, rows, 0, cols, kind == TilePlan.Kind.PARTIAL, unit, acc,
                    m, l, first ? 0.0 : 1.0);           // the first tile overwrites the accumulator
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
        Views.copy(acc, 0, out, qRow0 * d, (long) rows * d);
        Views.set(lse, qRow0, rowLse, rows);
    }

    /**
     * One online-softmax step on rows {@code r0 ...} ({@code n} of them) of the query block starting at local
     * query {@code q0} (element row {@code qRow0}) against columns
     * {@code c0 ...} ({@code cols} of them) of key block {@code kb}: scores, mask, powers, and the accumulator's
     * rows rescaled and updated ({@code beta} 0 overwrites them).
     */
    private void step(int b, int kb, int q0, long qRow0, long kOff, int r0, int n, int c0, int cols,
                      boolean partial, double unit, INDArray acc, double[] m, double[] l, double beta) {
        int d = s.headDim();
        INDArray scores = buffer(1, n, cols);
        TileProducts.timesTransposed(q, (qRow0 + r0) * d, k, kOff + (long) c0 * d, kt,
                packed ? PackedTranspose.offset(c0, d) : 0, d, scores, n, cols, scale * unit);
        if (partial) {
            math.mask(scores, plan, b, q0 + r0, n, kb, c0, cols);
        }
        double[] mg = java.util.Arrays.copyOfRange(m, r0, r0 + n);
        double[] alpha = new double[n];
        double[] rowSum = new double[n];
        boolean rescale = math.softmaxStep(scores, n, cols, mg, alpha, rowSum);
        System.arraycopy(mg, 0, m, r0, n);
        for (int r = 0; r < n; r++) {
            l[r0 + r] = alpha[r] * l[r0 + r] + rowSum[r];
        }
        if (rescale && beta != 0.0) {
            math.scaleRows(acc, r0, alpha, n, d);
        }
        TileProducts.times(packed, scores, 0, false, v, kOff + (long) c0 * d, acc, (long) r0 * d, n, d, cols, 1.0,
                beta != 0.0);
    }

    /** Each row's visible columns of key block {@code kb} into {@link #from} and {@link #to}. */
    private void runs(int b, int q0, int rows, int kb, int cols) {
        if (from.length < rows) {
            from = new int[rows];
            to = new int[rows];
        }
        for (int r = 0; r < rows; r++) {
            from[r] = plan.visibleFrom(b, q0 + r, kb, 0, cols);
            to[r] = plan.visibleTo(b, q0 + r, kb, 0, cols, from[r]);
        }
    }

    private INDArray buffer(int slot, int rows, int cols) {
        return Scratch.matrix(slot, type, rows, cols);
    }

}
