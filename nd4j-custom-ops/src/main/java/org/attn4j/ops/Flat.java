package org.attn4j.ops;

import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Element access to the flat off-heap buffer of a plain array (C order, no offset; see
 * {@link Views#plain}), FLOAT or DOUBLE, without ND4J calls. Element-wise work on small tiles done here
 * costs nanoseconds per element instead of an ND4J call of 10 to 30 microseconds each, and ND4J's
 * element-wise ops do not run concurrently from several Java threads (measured: two threads took twice
 * as long per call). Internal to attn4j: not a stable API.
 */
public final class Flat {

    private final FloatBuffer f;
    private final DoubleBuffer d;

    private Flat(INDArray a) {
        if (a.isView() || a.offset() != 0) {
            throw new IllegalStateException("Flat: needs a plain array, got a view");
        }
        if (a.length() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("Flat: " + a.length() + " elements; NIO buffers index at most "
                    + Integer.MAX_VALUE);
        }
        var bytes = a.data().asNio().order(ByteOrder.nativeOrder());
        if (a.dataType() == DataType.FLOAT) {
            f = bytes.asFloatBuffer();
            d = null;
        } else if (a.dataType() == DataType.DOUBLE) {
            f = null;
            d = bytes.asDoubleBuffer();
        } else {
            throw new IllegalStateException("Flat: FLOAT or DOUBLE only, got " + a.dataType());
        }
    }

    /** Access to {@code a}'s elements. */
    public static Flat of(INDArray a) {
        return new Flat(a);
    }

    /** Element {@code i} of the flat buffer. */
    public double get(long i) {
        return f != null ? f.get((int) i) : d.get((int) i);
    }

    /** Sets element {@code i} of the flat buffer. */
    public void set(long i, double v) {
        if (f != null) {
            f.put((int) i, (float) v);
        } else {
            d.put((int) i, v);
        }
    }

    /** {@code this[i] *= w[i]} for {@code i < n}. */
    public void multiply(double[] w, int n) {
        if (f != null) {
            for (int i = 0; i < n; i++) {
                f.put(i, (float) (f.get(i) * w[i]));
            }
        } else {
            for (int i = 0; i < n; i++) {
                d.put(i, d.get(i) * w[i]);
            }
        }
    }

    /**
     * Rows of {@code src} scaled: {@code this[r][c] = src[at + r * cols + c] * w[r]} for {@code r < rows}.
     */
    public void scaledRows(Flat src, long at, double[] w, int rows, int cols) {
        for (int r = 0; r < rows; r++) {
            long from = at + (long) r * cols;
            int to = r * cols;
            double s = w[r];
            for (int c = 0; c < cols; c++) {
                set(to + c, src.get(from + c) * s);
            }
        }
    }

    /** {@code sum_r w[r] * sum_c this[r][c] * other[at + r * cols + c]}: weighted row dot products. */
    public double weightedRowDots(Flat other, long at, double[] w, int rows, int cols) {
        double total = 0;
        for (int r = 0; r < rows; r++) {
            double dot = 0;
            long o = at + (long) r * cols;
            int t = r * cols;
            for (int c = 0; c < cols; c++) {
                dot += get(t + c) * other.get(o + c);
            }
            total += w[r] * dot;
        }
        return total;
    }
}
