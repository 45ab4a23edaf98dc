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
 * exponentials in base e by {@link #exp} (within a few ulps of {@link Math#exp}, so float64 results keep their
 * 1e-12 agreement with a plain reference, and the same whether the JIT has compiled the code or not). The softmax step takes two passes per row (the
 * maximum, then the powers and their sum): float64 is chosen for exactness, not speed. Loaded only when the
 * module {@code jdk.incubator.vector} is present ({@link VectorTileMath#createDouble}).
 */
final class DoubleVectorTileMath implements TileMath {

    private static final VectorSpecies<Double> S = DoubleVector.SPECIES_PREFERRED;
    private static final int L = S.length();
    private static final ByteOrder ORDER = ByteOrder.nativeOrder();
    private static final int BYTES = Double.BYTES;

    // exp's constants: log2(e), 1.5 * 2^52 (adding it rounds to an integer, kept in the low bits), ln 2 in two parts
    // and 1/k! for k = 13 down to 0, e^r by Horner's rule; each also as a vector.
    private static final double LOG2E_D = 1.4426950408889634;
    private static final double MAGIC_D = 6755399441055744.0;
    private static final long MAGIC_BITS = Double.doubleToRawLongBits(MAGIC_D);
    private static final double MINUS_LN2_HI_D = -6.93147180369123816490e-01;
    private static final double MINUS_LN2_LO_D = -1.90821492927058770002e-10;
    private static final double[] TAYLOR = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0,
        1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0,
        1.0 / 2.0, 1.0, 1.0};
    private static final DoubleVector LOG2E = DoubleVector.broadcast(S, LOG2E_D);
    private static final DoubleVector MAGIC = DoubleVector.broadcast(S, MAGIC_D);
    private static final DoubleVector MINUS_LN2_HI = DoubleVector.broadcast(S, MINUS_LN2_HI_D);
    private static final DoubleVector MINUS_LN2_LO = DoubleVector.broadcast(S, MINUS_LN2_LO_D);
    private static final DoubleVector C13 = DoubleVector.broadcast(S, TAYLOR[0]);
    private static final DoubleVector C12 = DoubleVector.broadcast(S, TAYLOR[1]);
    private static final DoubleVector C11 = DoubleVector.broadcast(S, TAYLOR[2]);
    private static final DoubleVector C10 = DoubleVector.broadcast(S, TAYLOR[3]);
    private static final DoubleVector C9 = DoubleVector.broadcast(S, TAYLOR[4]);
    private static final DoubleVector C8 = DoubleVector.broadcast(S, TAYLOR[5]);
    private static final DoubleVector C7 = DoubleVector.broadcast(S, TAYLOR[6]);
    private static final DoubleVector C6 = DoubleVector.broadcast(S, TAYLOR[7]);
    private static final DoubleVector C5 = DoubleVector.broadcast(S, TAYLOR[8]);
    private static final DoubleVector C4 = DoubleVector.broadcast(S, TAYLOR[9]);
    private static final DoubleVector C3 = DoubleVector.broadcast(S, TAYLOR[10]);
    private static final DoubleVector C2 = DoubleVector.broadcast(S, TAYLOR[11]);
    private static final DoubleVector ONE = DoubleVector.broadcast(S, 1.0);

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
            DoubleVector e = exp(DoubleVector.fromByteBuffer(S, bb, pos, ORDER).add(shift));
            e.intoByteBuffer(bb, pos, ORDER);
            vsum = vsum.add(e);
        }
        double sum = vsum.reduceLanes(VectorOperators.ADD);
        for (int c = full; c < cols; c++) {
            int pos = base + c * BYTES;
            double e = exp(bb.getDouble(pos) + shift);
            bb.putDouble(pos, e);
            sum += e;
        }
        return sum;
    }

    /**
     * {@code e^x} for double lanes from additions, multiplications and bit operations only, which Java defines
     * exactly whether the Vector API runs compiled or interpreted, so a result never depends on how far the JIT
     * has got (a resumed run repeats an uninterrupted one bit for bit). {@code x = n ln 2 + r} with n the nearest
     * integer to {@code x / ln 2} (ln 2 in two parts), {@code e^r} by its Taylor series to degree 13 on
     * {@code |r| <= ln 2 / 2} (truncation below 2e-16), n put in the exponent. Below -708 it gives 0 (so -inf
     * gives 0); NaN stays NaN.
     */
    static DoubleVector exp(DoubleVector x) {
        DoubleVector clamped = x.max(-708.0).min(709.0);
        DoubleVector t = clamped.fma(LOG2E, MAGIC);                  // n + 1.5 * 2^52: n in the low bits
        DoubleVector n = t.sub(MAGIC);
        DoubleVector r = n.fma(MINUS_LN2_HI, clamped).add(n.mul(MINUS_LN2_LO));
        DoubleVector p = C13.fma(r, C12).fma(r, C11).fma(r, C10).fma(r, C9).fma(r, C8).fma(r, C7).fma(r, C6)
                .fma(r, C5).fma(r, C4).fma(r, C3).fma(r, C2).fma(r, ONE).fma(r, ONE);
        DoubleVector twoToN = t.reinterpretAsLongs().sub(MAGIC_BITS - 1023).lanewise(VectorOperators.LSHL, 52)
                .reinterpretAsDoubles();
        return p.mul(twoToN).blend(0.0, x.compare(VectorOperators.LT, -708.0));
    }

    /**
     * {@link #exp(DoubleVector)} of one value, step for step in scalar arithmetic, so the bits are the same: a row's
     * tail (its last {@code cols % L} elements, all of a row shorter than a vector) no longer runs a whole vector
     * for each element, which without the JIT's vector intrinsics costs an allocation per operation.
     */
    static double exp(double x) {
        double clamped = Math.min(Math.max(x, -708.0), 709.0);
        double t = Math.fma(clamped, LOG2E_D, MAGIC_D);
        double n = t - MAGIC_D;
        double r = Math.fma(n, MINUS_LN2_HI_D, clamped) + n * MINUS_LN2_LO_D;
        double p = TAYLOR[0];
        for (int i = 1; i < TAYLOR.length; i++) {
            p = Math.fma(p, r, TAYLOR[i]);
        }
        double twoToN = Double.longBitsToDouble((Double.doubleToRawLongBits(t) - (MAGIC_BITS - 1023)) << 52);
        return x < -708.0 ? 0.0 : p * twoToN;
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
