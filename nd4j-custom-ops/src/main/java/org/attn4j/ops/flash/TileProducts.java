package org.attn4j.ops.flash;

import org.attn4j.ops.Gemm;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The products of a score tile, by the native code ({@link NativeTileMath}, when the kernel packed its key block) or
 * by {@link Gemm}: one call site in the kernels for either. Blocks are row-major in flat buffers, offsets in elements.
 */
final class TileProducts {

    private TileProducts() {
    }

    /**
     * {@code C[rows x cols] = alpha A B^T}, A's rows of width {@code d} from {@code aOff}, B's rows from {@code bOff}
     * (Gemm), or B^T packed in {@code bt} from {@code btOff} (native, when {@code bt} is not null).
     */
    static void timesTransposed(INDArray a, long aOff, INDArray b, long bOff, INDArray bt, long btOff, int d,
                                INDArray c, int rows, int cols, double alpha) {
        if (bt != null) {
            NativeTileMath.productTransposed(a, aOff, d, bt, btOff, d, c, 0, cols, rows, cols, alpha);
        } else {
            Gemm.mul(a, aOff, false, b, bOff, true, c, 0, rows, cols, d, alpha, 0.0);
        }
    }

    /**
     * {@code C[m x n] = alpha op(A) B (+ C when add)}, op(A) {@code m x k} stored {@code k x m} when {@code ta}, B's rows
     * of {@code n} from {@code bOff}; natively when {@code packed}.
     */
    static void times(boolean packed, INDArray a, long aOff, boolean ta, INDArray b, long bOff, INDArray c, long cOff,
                      int m, int n, int k, double alpha, boolean add) {
        if (packed) {
            NativeTileMath.product(a, aOff, ta ? 1 : k, ta ? m : 1, b, bOff, n, c, cOff, n, m, n, k, alpha, add);
        } else {
            Gemm.mul(a, aOff, ta, b, bOff, false, c, cOff, m, n, k, alpha, add ? 1.0 : 0.0);
        }
    }
}
