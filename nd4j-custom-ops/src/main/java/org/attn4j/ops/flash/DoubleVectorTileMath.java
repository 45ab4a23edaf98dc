package org.attn4j.ops.flash;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.attn4j.ops.Views;
import org.nd4j.linalg.api.ndarray.INDArray;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link TileMath} for float64 tiles with the JDK Vector API: each step one pass over a row's elements in place,
 * exponentials in base e through {@code lanewise(EXP)} (within an ulp or two of {@link Math#exp}, so float64
 * results keep their 1e-12 agreement with a plain reference). The softmax step takes two passes per row (the
 * maximum, then the powers and their sum): float64 is chosen for exactness, not speed. Loaded only when the
 * module {@code jdk.incubator.vector} is present ({@link VectorTileMath#createDouble}).
 */
final class DoubleVectorTileMath implements TileMath {

    private static final VectorSpecies<Double> S = DoubleVector.SPECIES_PREFERRED;
    private static final int L = S.length();
    private static final ByteOrder ORDER = ByteOrder.nativeOrder();
    private static final int BYTES = Double.BYTES;

    @Override
    public boolean softmaxStep(INDArray scores, int rows, int cols, double[] m, double[] alpha, double[] rowSum) {
        ByteBuffer bb = bytes(scores);
        int full = cols - cols % L;
        boolean rescale = false;
        for (int r = 0; r < rows; r++) {
            int base = r * cols * BYTES;
            DoubleVector vmax = DoubleVector.broadcast(S, Double.NEGATIVE_INFINITY);
            for (int c = 0; c < full; c += L) {
                vmax = vmax.max(DoubleVector.fromByteBuffer(S, bb, base + c * BYTES, ORDER));
            }
            double tileMax = vmax.reduceLanes(VectorOperators.MAX);
            for (int c = full; c < cols; c++) {
                tileMax = Math.max(tileMax, bb.getDouble(base + c * BYTES));
            }
            double mNew = Math.max(m[r], tileMax);
            alpha[r] = m[r] == mNew ? 1.0 : Math.exp(m[r] - mNew);
            rescale |= alpha[r] != 1.0;
            m[r] = mNew;
            // A row that has seen no key yet keeps m = -inf: shift by 0 so exp(-inf) gives 0, not NaN.
            double shift = mNew == Double.NEGATIVE_INFINITY ? 0.0 : mNew;
            rowSum[r] = expRow(bb, base, cols, -shift);
        }
        return rescale;
    }

    @Override
    public void expShifted(INDArray p, INDArray shifts, long at, int rows, int cols) {
        ByteBuffer bb = bytes(p);
        double[] sh = Views.get(shifts, at, rows);
        for (int r = 0; r < rows; r++) {
            expRow(bb, r * cols * BYTES, cols, sh[r]);
        }
    }

    /** Overwrites a row with {@code exp(x + shift)} and returns the row's sum. */
    private static double expRow(ByteBuffer bb, int base, int cols, double shift) {
        int full = cols - cols % L;
        DoubleVector vsum = DoubleVector.zero(S);
        for (int c = 0; c < full; c += L) {
            int pos = base + c * BYTES;
            DoubleVector e = DoubleVector.fromByteBuffer(S, bb, pos, ORDER).add(shift)
                    .lanewise(VectorOperators.EXP);
            e.intoByteBuffer(bb, pos, ORDER);
            vsum = vsum.add(e);
        }
        double sum = vsum.reduceLanes(VectorOperators.ADD);
        for (int c = full; c < cols; c++) {
            int pos = base + c * BYTES;
            double e = Math.exp(bb.getDouble(pos) + shift);
            bb.putDouble(pos, e);
            sum += e;
        }
        return sum;
    }

    @Override
    public void shiftedProduct(INDArray dp, INDArray p, INDArray shifts, long at, int rows, int cols) {
        ByteBuffer bd = bytes(dp);
        ByteBuffer bp = bytes(p);
        double[] sh = Views.get(shifts, at, rows);
        int full = cols - cols % L;
        for (int r = 0; r < rows; r++) {
            int base = r * cols * BYTES;
            double s = sh[r];
            for (int c = 0; c < full; c += L) {
                int pos = base + c * BYTES;
                DoubleVector.fromByteBuffer(S, bd, pos, ORDER).add(s)
                        .mul(DoubleVector.fromByteBuffer(S, bp, pos, ORDER)).intoByteBuffer(bd, pos, ORDER);
            }
            for (int c = full; c < cols; c++) {
                int pos = base + c * BYTES;
                bd.putDouble(pos, (bd.getDouble(pos) + s) * bp.getDouble(pos));
            }
        }
    }

    @Override
    public void mask(INDArray tile, TilePlan plan, int b, int q0, int rows, int kb, int c0, int cols) {
        ByteBuffer bb = bytes(tile);
        plan.hiddenRuns(b, q0, rows, kb, c0, cols, (r, from, to) -> fill(bb, r * cols, from, to));
    }

    /** Sets elements {@code [from, to)} of the row starting at element {@code row} to negative infinity. */
    private static void fill(ByteBuffer bb, int row, int from, int to) {
        DoubleVector hidden = DoubleVector.broadcast(S, Double.NEGATIVE_INFINITY);
        int c = from;
        for (; c + L <= to; c += L) {
            hidden.intoByteBuffer(bb, (row + c) * BYTES, ORDER);
        }
        for (; c < to; c++) {
            bb.putDouble((row + c) * BYTES, Double.NEGATIVE_INFINITY);
        }
    }

    @Override
    public void scaleRows(INDArray m, int row0, double[] factors, int rows, int cols) {
        ByteBuffer bb = bytes(m);
        int full = cols - cols % L;
        for (int r = 0; r < rows; r++) {
            int base = (row0 + r) * cols * BYTES;
            double f = factors[r];
            for (int c = 0; c < full; c += L) {
                int pos = base + c * BYTES;
                DoubleVector.fromByteBuffer(S, bb, pos, ORDER).mul(f).intoByteBuffer(bb, pos, ORDER);
            }
            for (int c = full; c < cols; c++) {
                bb.putDouble(base + c * BYTES, bb.getDouble(base + c * BYTES) * f);
            }
        }
    }

    private static ByteBuffer bytes(INDArray a) {
        if (a.offset() != 0 || a.isView()) {
            throw new IllegalStateException("DoubleVectorTileMath: tiles must be dedicated buffers");
        }
        return a.data().asNio().order(ORDER);
    }
}
