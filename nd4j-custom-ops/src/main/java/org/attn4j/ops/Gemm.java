package org.attn4j.ops;

import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * {@code C = alpha op(A) op(B) + beta C} on row-major blocks inside the flat buffers of C-ordered, offset-free
 * arrays, without building ND4J views. On the CPU backend it calls OpenBLAS's {@code cblas_?gemm} on the
 * buffers' addresses (the same library ND4J calls, so the same thread setting); elsewhere it builds
 * {@link Views} and calls {@link Nd4j#gemm}. Why: each ND4J view and each {@code Nd4j.gemm} registers native
 * bookkeeping (a data buffer and an op context with their deallocators). Measured here, a 256 x 64 by
 * 64 x 256 product: 115 us through a view and {@code Nd4j.gemm}, 82 us through {@code cblas_sgemm}; in a loop
 * of linear attention forward calls, G1 young pauses of 60-70 ms about once a second copying that
 * bookkeeping. Internal to attn4j: not a stable API.
 */
public final class Gemm {

    /** Off only to compare the two paths: {@code -Dattn4j.directBlas=false}. */
    private static final boolean DIRECT = Nd4j.getEnvironment().isCPU()
            && !"false".equals(System.getProperty("attn4j.directBlas"));

    private Gemm() {
    }

    /**
     * {@code C[m x n] = alpha op(A) op(B) + beta C}, every block row-major and dense: {@code op(A)} is
     * {@code m x k}, stored as {@code k x m} when {@code ta}; {@code op(B)} is {@code k x n}, stored as
     * {@code n x k} when {@code tb}. Offsets count elements from the start of each array's buffer.
     *
     * @throws IllegalStateException if an array is a view with an offset, a block does not fit its buffer, or
     *                               the types differ or are not float32 / float64 (internal callers pass plain
     *                               arrays)
     */
    public static void mul(INDArray a, long aOff, boolean ta, INDArray b, long bOff, boolean tb, INDArray c,
                           long cOff, int m, int n, int k, double alpha, double beta) {
        // BLAS reads and writes raw memory: a block past its buffer's end must fail here, not corrupt the heap.
        fits("A", a, aOff, (long) m * k);
        fits("B", b, bOff, (long) k * n);
        fits("C", c, cOff, (long) m * n);
        if (!DIRECT) {
            Nd4j.gemm(Views.matrix(a, aOff, ta ? k : m, ta ? m : k), Views.matrix(b, bOff, tb ? n : k, tb ? k : n),
                    Views.matrix(c, cOff, m, n), ta, tb, alpha, beta);
            return;
        }
        DataType type = c.dataType();
        if (a.offset() != 0 || b.offset() != 0 || c.offset() != 0 || a.dataType() != type || b.dataType() != type) {
            throw new IllegalStateException("Gemm: expected offset-free arrays of one type, got offsets " + a.offset()
                    + ", " + b.offset() + ", " + c.offset() + " and types " + a.dataType() + ", " + b.dataType()
                    + ", " + type);
        }
        int lda = ta ? m : k;
        int ldb = tb ? k : n;
        int opA = ta ? openblas_nolapack.CblasTrans : openblas_nolapack.CblasNoTrans;
        int opB = tb ? openblas_nolapack.CblasTrans : openblas_nolapack.CblasNoTrans;
        switch (type) {
            case FLOAT -> openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, opA, opB, m, n, k,
                    (float) alpha, floats(a, aOff), lda, floats(b, bOff), ldb, (float) beta, floats(c, cOff), n);
            case DOUBLE -> openblas_nolapack.cblas_dgemm(openblas_nolapack.CblasRowMajor, opA, opB, m, n, k,
                    alpha, doubles(a, aOff), lda, doubles(b, bOff), ldb, beta, doubles(c, cOff), n);
            default -> throw new IllegalStateException("Gemm: float32 or float64 expected, got " + type);
        }
    }

    /**
     * {@code y[1 x n] = x[1 x k] w[k x n]}: a row vector times a matrix, the product of a decoding step. On the CPU
     * backend, for a {@code w} whose rows or columns are dense (a layer's parameter view of either order), it calls
     * OpenBLAS's {@code cblas_?gemv}, which streams {@code w} once; ND4J's {@code mmul} of a single row runs a
     * general product that packs {@code w} first. Measured here, 90 float32 matrices of 576 x 1536 (318 MB, from
     * memory): 26-33 GB/s through {@code cblas_sgemv}, 1-4.5 GB/s through {@code mmuli}. Otherwise it runs
     * {@code x.mmuli(w, y)}.
     *
     * @throws IllegalArgumentException if the shapes do not match or the types differ
     */
    public static void vectorTimes(INDArray x, INDArray w, INDArray y) {
        if (w.rank() != 2 || x.length() != w.size(0) || y.length() != w.size(1) || x.dataType() != w.dataType()
                || y.dataType() != w.dataType()) {
            throw new IllegalArgumentException("Gemm: x [1, k] w [k, n] -> y [1, n] of one type expected, got "
                    + java.util.Arrays.toString(x.shape()) + " " + x.dataType() + ", "
                    + java.util.Arrays.toString(w.shape()) + " " + w.dataType() + ", "
                    + java.util.Arrays.toString(y.shape()) + " " + y.dataType());
        }
        int k = (int) w.size(0);
        int n = (int) w.size(1);
        long[] st = w.stride();
        boolean columns = st[0] == 1 && st[1] >= k;                 // column-major: lda = st[1]
        boolean rows = st[1] == 1 && st[0] >= n;                    // row-major: lda = st[0]
        long span = columns ? (n - 1) * st[1] + k : (k - 1) * st[0] + n;
        // A view's buffer starts at the view (ND4J 1.0.0-M2.1: its offset is the buffer's): the address is w's first.
        boolean dense = (columns || rows) && dense(x) && dense(y) && w.data().offset() == w.offset()
                && w.data().length() >= span;
        DataType type = w.dataType();
        if (!DIRECT || !dense || (type != DataType.FLOAT && type != DataType.DOUBLE)) {
            x.reshape(1, k).mmuli(w, y.reshape(1, n));
            return;
        }
        int layout = columns ? openblas_nolapack.CblasColMajor : openblas_nolapack.CblasRowMajor;
        int lda = (int) (columns ? st[1] : st[0]);
        if (type == DataType.FLOAT) {
            openblas_nolapack.cblas_sgemv(layout, openblas_nolapack.CblasTrans, k, n, 1f, floats(w, 0), lda,
                    floats(x, 0), 1, 0f, floats(y, 0), 1);
        } else {
            openblas_nolapack.cblas_dgemv(layout, openblas_nolapack.CblasTrans, k, n, 1.0, doubles(w, 0), lda,
                    doubles(x, 0), 1, 0.0, doubles(y, 0), 1);
        }
    }

    /** Whether {@code a}'s elements are its buffer's first {@code a.length()}, consecutive. */
    private static boolean dense(INDArray a) {
        return a.data().offset() == a.offset() && a.data().length() >= a.length()
                && (a.isVector() || a.isScalar()) && a.elementWiseStride() == 1;
    }

    private static void fits(String name, INDArray x, long offset, long size) {
        if (offset < 0 || offset + size > x.data().length()) {
            throw new IllegalStateException("Gemm: block " + name + " of " + size + " elements at offset " + offset
                    + " does not fit its buffer of " + x.data().length());
        }
    }

    private static FloatPointer floats(INDArray x, long offset) {
        return new FloatPointer(x.data().addressPointer()).position(offset);
    }

    private static DoublePointer doubles(INDArray x, long offset) {
        return new DoublePointer(x.data().addressPointer()).position(offset);
    }
}
