package org.attn4j.ops.flash;

import org.attn4j.ops.Scratch;
import org.attn4j.ops.Views;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * FlashAttention-2 backward (Dao 2023, algorithm 2) for one key block of one (batch, kv head): the tiles
 * are recomputed from q, k and the saved LSE ({@code P = exp(scale q k^T - LSE)}), never stored.
 * With {@code Delta_i = rowsum(dO_i * O_i)}:
 * <pre>
 *   dV_j += P^T dO_i        dP = dO_i V_j^T        dS = P * (dP - Delta_i)
 *   dQ_i += scale dS K_j    dK_j += scale dS^T Q_i
 * </pre>
 * dK_j and dV_j accumulate over every query head of the GQA group and every query block in place (one
 * thread owns a key block); dQ accumulates into this thread's own dQ array (key blocks of one query block run on
 * different threads), summed by the caller.
 */
final class BackwardKernel {

    private final INDArray q;
    private final INDArray k;
    private final INDArray v;
    private final INDArray dOut;
    private final INDArray negLse;
    private final INDArray negDelta;
    private final INDArray dq;
    private final INDArray dk;
    private final INDArray dv;
    private final AttentionShapes s;
    private final TilePlan plan;
    private final double scale;
    private final DataType type;
    private final TileMath math;
    /** Whether the products are native ({@link NativeTileMath}) rather than {@link org.attn4j.ops.Gemm}. */
    private final boolean packed;

    /**
     * @param negLse   {@code -LSE} {@code [B, H, Nq]}, with 0 where LSE is -inf (rows that saw no key)
     * @param negDelta {@code -rowsum(dO * O)} {@code [B, H, Nq]}
     * @param dq       this thread's dQ accumulator {@code [B, H, Nq, D]}, zero on entry
     */
    BackwardKernel(INDArray q, INDArray k, INDArray v, INDArray dOut, INDArray negLse, INDArray negDelta,
                   INDArray dq, INDArray dk, INDArray dv, AttentionShapes s, TilePlan plan, double scale,
                   boolean packed) {
        this.q = q;
        this.k = k;
        this.v = v;
        this.dOut = dOut;
        this.negLse = negLse;
        this.negDelta = negDelta;
        this.dq = dq;
        this.dk = dk;
        this.dv = dv;
        this.s = s;
        this.plan = plan;
        this.scale = scale;
        this.type = s.dataType();
        this.math = TileMath.forType(type);
        this.packed = packed;
    }

    /** Computes dK, dV of key block {@code kb} of kv head {@code hk} in sequence {@code b}, and adds to dQ. */
    void run(int b, int hk, int kb) {
        int d = s.headDim();
        int cols = plan.keyCols(kb);
        long kOff = (((long) b * s.kvHeads() + hk) * s.keys() + plan.keyStart(kb)) * d;
        boolean first = true;
        // This key block's K^T and V^T, packed once for all its query blocks.
        INDArray kt = packed ? PackedTranspose.block(4, k, kOff, cols, d, plan.keyCols(0)) : null;
        INDArray vt = packed ? PackedTranspose.block(5, v, kOff, cols, d, plan.keyCols(0)) : null;
        for (int g = 0; g < s.group(); g++) {
            int h = hk * s.group() + g;
            for (int qb = 0; qb < plan.queryBlocks; qb++) {
                TilePlan.Kind kind = plan.kind(b, qb, kb);
                if (kind == TilePlan.Kind.SKIP) {
                    continue;
                }
                int rows = plan.queryRows(qb);
                long row = (((long) b * s.heads() + h) * s.queries() + plan.queryStart(qb));
                long at = row * d;
                INDArray p = buffer(2, rows, cols);
                INDArray ds = buffer(3, rows, cols);
                // The first tile overwrites the accumulators dK and dV (add = !first).
                TileProducts.timesTransposed(q, at, k, kOff, kt, 0, d, p, rows, cols, scale);
                if (kind == TilePlan.Kind.PARTIAL) {
                    math.mask(p, plan, b, qb, kb);
                }
                math.expShifted(p, negLse, row, rows, cols);
                TileProducts.times(packed, p, 0, true, dOut, at, dv, kOff, cols, d, rows, 1.0, !first);
                TileProducts.timesTransposed(dOut, at, v, kOff, vt, 0, d, ds, rows, cols, 1.0);
                math.shiftedProduct(ds, p, negDelta, row, rows, cols);
                TileProducts.times(packed, ds, 0, false, k, kOff, dq, at, rows, d, cols, scale, true);
                TileProducts.times(packed, ds, 0, true, q, at, dk, kOff, cols, d, rows, scale, !first);
                first = false;
            }
        }
        if (first) {                                   // every query block was masked away
            Views.matrix(dk, kOff, cols, d).assign(0);
            Views.matrix(dv, kOff, cols, d).assign(0);
        }
    }

    private INDArray buffer(int slot, int rows, int cols) {
        return Scratch.matrix(slot, type, rows, cols);
    }

}
