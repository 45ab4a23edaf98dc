package org.attn4j.ops;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Cheap views into the flat buffer of a C-ordered, offset-free array, and Java-side copies of short
 * column vectors. Built straight on the data buffer: an {@code NDArrayIndex} view costs tens of
 * microseconds, which adds up over thousands of tiles. Internal to attn4j: not a stable API.
 */
public final class Views {

    private Views() {
    }

    /** The {@code rows x cols} row-major matrix starting at element {@code offset} of {@code a}'s buffer. */
    public static INDArray matrix(INDArray a, long offset, long rows, long cols) {
        return Nd4j.create(a.data(), new long[] {rows, cols}, new long[] {cols, 1}, offset, 'c', a.dataType());
    }

    /** The {@code rows x 1} column of consecutive elements starting at {@code offset}. */
    public static INDArray column(INDArray a, long offset, long rows) {
        return Nd4j.create(a.data(), new long[] {rows, 1}, new long[] {1, 1}, offset, 'c', a.dataType());
    }

    /** Copies {@code values} into the first elements of a dedicated (non-view) buffer array. */
    public static void put(INDArray dst, double[] values, int n) {
        if (dst.length() != n) {
            throw new IllegalStateException("Views.put: buffer holds " + dst.length() + " values, got " + n);
        }
        switch (dst.dataType()) {
            case DOUBLE -> dst.data().setData(n == values.length ? values : java.util.Arrays.copyOf(values, n));
            case FLOAT -> {
                float[] f = new float[n];
                for (int i = 0; i < n; i++) {
                    f[i] = (float) values[i];
                }
                dst.data().setData(f);
            }
            default -> throw new IllegalStateException("Views.put: unsupported type " + dst.dataType());
        }
    }

    /** Reads {@code n} values of {@code a}'s buffer starting at element {@code offset}. */
    public static double[] get(INDArray a, long offset, int n) {
        double[] out = new double[n];
        var data = a.data();
        for (int i = 0; i < n; i++) {
            out[i] = data.getDouble(offset + i);
        }
        return out;
    }

    /** Writes {@code n} values into {@code a}'s buffer starting at element {@code offset}. */
    public static void set(INDArray a, long offset, double[] values, int n) {
        var data = a.data();
        for (int i = 0; i < n; i++) {
            data.put(offset + i, values[i]);
        }
    }

    /**
     * Copies {@code n} elements of {@code src}'s buffer from element {@code srcOffset} to {@code dst}'s from
     * {@code dstOffset}, both offset-free arrays of one type: {@code memcpy} on the CPU backend (an ND4J view and
     * {@code assign} cost about 0.2 ms for a 512 x 64 block here), a view's {@code assign} on the others.
     */
    public static void copy(INDArray src, long srcOffset, INDArray dst, long dstOffset, long n) {
        if (src.dataType() != dst.dataType() || src.offset() != 0 || dst.offset() != 0
                || srcOffset < 0 || dstOffset < 0 || srcOffset + n > src.data().length()
                || dstOffset + n > dst.data().length()) {
            throw new IllegalStateException("Views.copy: " + n + " elements from " + srcOffset + " of "
                    + src.data().length() + " to " + dstOffset + " of " + dst.data().length() + ", types "
                    + src.dataType() + " and " + dst.dataType());
        }
        if (!Nd4j.getEnvironment().isCPU()) {
            column(dst, dstOffset, n).assign(column(src, srcOffset, n));
            return;
        }
        long width = src.dataType().width();
        Pointer.memcpy(new BytePointer(dst.data().addressPointer()).position(dstOffset * width),
                new BytePointer(src.data().addressPointer()).position(srcOffset * width), n * width);
    }

    /**
     * Rows {@code [.., D]} from one head to the next in the buffer of a rank-4 array {@code [B, H, N, D]} whose
     * heads each hold N consecutive rows, or -1: N for a plain array; R >= N for a view of the first N rows of each
     * head of a plain {@code [B, H, R, D]} array (a key/value cache with room to grow), which the forward kernel
     * reads in place.
     */
    public static long headRows(INDArray a) {
        if (a.rank() != 4 || a.offset() != 0) {
            return -1;
        }
        long[] st = a.stride();
        long d = a.size(3);
        boolean rows = a.ordering() == 'c' && st[3] == 1 && st[2] == d && d > 0 && st[1] % d == 0
                && st[1] / d >= a.size(2) && st[0] == a.size(1) * st[1]
                && a.data().length() >= a.size(0) * st[0];
        return rows ? st[1] / d : -1;
    }

    /** A C-ordered, offset-free copy of {@code a} if it is not one already. */
    public static INDArray plain(INDArray a) {
        boolean plain = a.ordering() == 'c' && !a.isView() && a.offset() == 0
                && a.data().length() == a.length();
        return plain ? a : a.dup('c');
    }
}
