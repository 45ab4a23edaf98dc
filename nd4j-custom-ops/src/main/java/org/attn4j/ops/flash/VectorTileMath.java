package org.attn4j.ops.flash;

import org.attn4j.ops.Views;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.nd4j.linalg.api.ndarray.INDArray;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link TileMath} for FLOAT tiles as one fused pass per row with the JDK Vector API, straight on
 * ND4J's off-heap buffers (no copies). Replaces four ND4J calls per step (row max, shift, exp, row
 * sum), and exp itself runs several times faster than ND4J's: on this 2-core AVX-512 machine a
 * 512 x 512 max + exp + sum took about 190 us against about 500 us for ND4J's exp alone.
 *
 * <p>Needs {@code --add-modules jdk.incubator.vector} at run time; without it {@link #AVAILABLE} is
 * false and {@link TileMath#forType} falls back to {@link Nd4jTileMath}. This class is only loaded
 * when the module is present.
 */
final class VectorTileMath {

    /** Whether the incubator module is in the boot layer (checked without loading vector classes). */
    static final boolean AVAILABLE = ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent();

    private static final ByteOrder ORDER = ByteOrder.nativeOrder();

    private VectorTileMath() {
    }

    static TileMath create() {
        return new Impl();
    }

    /** Separate class so that no Vector API type is resolved unless the module is present. */
    private static final class Impl implements TileMath {
        private static final VectorSpecies<Float> S = FloatVector.SPECIES_PREFERRED;
        private static final int L = S.length();

        @Override
        public boolean softmaxStep(INDArray scores, int rows, int cols, double[] m, double[] alpha,
                                   double[] rowSum) {
            ByteBuffer bb = bytes(scores);
            int full = cols - cols % L;
            boolean rescale = false;
            for (int r = 0; r < rows; r++) {
                int base = r * cols * 4;
                FloatVector vmax = FloatVector.broadcast(S, Float.NEGATIVE_INFINITY);
                for (int c = 0; c < full; c += L) {
                    vmax = vmax.max(FloatVector.fromByteBuffer(S, bb, base + c * 4, ORDER));
                }
                float tileMax = vmax.reduceLanes(VectorOperators.MAX);
                for (int c = full; c < cols; c++) {
                    tileMax = Math.max(tileMax, bb.getFloat(base + c * 4));
                }
                double mNew = Math.max(m[r], tileMax);
                alpha[r] = m[r] == mNew ? 1.0 : Math.exp(m[r] - mNew);
                rescale |= alpha[r] != 1.0;
                m[r] = mNew;
                // A row that has seen no key yet keeps m = -inf: shift by 0 so exp(-inf) gives 0, not NaN.
                float shift = mNew == Double.NEGATIVE_INFINITY ? 0f : (float) -mNew;
                FloatVector vsum = FloatVector.zero(S);
                for (int c = 0; c < full; c += L) {
                    FloatVector x = FloatVector.fromByteBuffer(S, bb, base + c * 4, ORDER)
                            .add(shift).lanewise(VectorOperators.EXP);
                    x.intoByteBuffer(bb, base + c * 4, ORDER);
                    vsum = vsum.add(x);
                }
                double sum = vsum.reduceLanes(VectorOperators.ADD);
                for (int c = full; c < cols; c++) {
                    float x = (float) Math.exp(bb.getFloat(base + c * 4) + shift);
                    bb.putFloat(base + c * 4, x);
                    sum += x;
                }
                rowSum[r] = sum;
            }
            return rescale;
        }

        @Override
        public void expShifted(INDArray p, INDArray shifts, long at, int rows, int cols) {
            ByteBuffer bb = bytes(p);
            double[] sh = Views.get(shifts, at, rows);
            int full = cols - cols % L;
            for (int r = 0; r < rows; r++) {
                int base = r * cols * 4;
                float s = (float) sh[r];
                for (int c = 0; c < full; c += L) {
                    FloatVector.fromByteBuffer(S, bb, base + c * 4, ORDER).add(s).lanewise(VectorOperators.EXP)
                            .intoByteBuffer(bb, base + c * 4, ORDER);
                }
                for (int c = full; c < cols; c++) {
                    bb.putFloat(base + c * 4, (float) Math.exp(bb.getFloat(base + c * 4) + s));
                }
            }
        }

        @Override
        public void shiftedProduct(INDArray dp, INDArray p, INDArray shifts, long at, int rows, int cols) {
            ByteBuffer bd = bytes(dp);
            ByteBuffer bp = bytes(p);
            double[] sh = Views.get(shifts, at, rows);
            int full = cols - cols % L;
            for (int r = 0; r < rows; r++) {
                int base = r * cols * 4;
                float s = (float) sh[r];
                for (int c = 0; c < full; c += L) {
                    int pos = base + c * 4;
                    FloatVector.fromByteBuffer(S, bd, pos, ORDER).add(s)
                            .mul(FloatVector.fromByteBuffer(S, bp, pos, ORDER)).intoByteBuffer(bd, pos, ORDER);
                }
                for (int c = full; c < cols; c++) {
                    int pos = base + c * 4;
                    bd.putFloat(pos, (bd.getFloat(pos) + s) * bp.getFloat(pos));
                }
            }
        }

        @Override
        public void mask(INDArray tile, TilePlan plan, int b, int qb, int kb) {
            ByteBuffer bb = bytes(tile);
            int rows = plan.queryRows(qb);
            int cols = plan.keyCols(kb);
            int q0 = plan.queryStart(qb);
            int k0 = plan.keyStart(kb);
            if (!plan.keysAscend(kb)) {
                for (int r = 0; r < rows; r++) {
                    for (int c = 0; c < cols; c++) {
                        if (!plan.allowed(b, q0 + r, k0 + c)) {
                            bb.putFloat((r * cols + c) * 4, Float.NEGATIVE_INFINITY);
                        }
                    }
                }
                return;
            }
            // Keys ascend: what a query may see by position is one run of columns; hide what lies outside it.
            for (int r = 0; r < rows; r++) {
                int from = plan.allowedFrom(q0 + r, kb);
                int to = Math.max(from, plan.allowedTo(q0 + r, kb));
                fill(bb, r * cols, 0, from);
                fill(bb, r * cols, to, cols);
            }
            if (plan.partlyPadded(b, kb)) {
                for (int c = 0; c < cols; c++) {
                    if (!plan.keyValid(b, k0 + c)) {
                        for (int r = 0; r < rows; r++) {
                            bb.putFloat((r * cols + c) * 4, Float.NEGATIVE_INFINITY);
                        }
                    }
                }
            }
        }

        /** Sets elements {@code [from, to)} of the row starting at element {@code row} to negative infinity. */
        private static void fill(ByteBuffer bb, int row, int from, int to) {
            FloatVector hidden = FloatVector.broadcast(S, Float.NEGATIVE_INFINITY);
            int c = from;
            for (; c + L <= to; c += L) {
                hidden.intoByteBuffer(bb, (row + c) * 4, ORDER);
            }
            for (; c < to; c++) {
                bb.putFloat((row + c) * 4, Float.NEGATIVE_INFINITY);
            }
        }

        @Override
        public void scaleRows(INDArray m, double[] factors, int rows, int cols) {
            ByteBuffer bb = bytes(m);
            int full = cols - cols % L;
            for (int r = 0; r < rows; r++) {
                int base = r * cols * 4;
                float f = (float) factors[r];
                for (int c = 0; c < full; c += L) {
                    int at = base + c * 4;
                    FloatVector.fromByteBuffer(S, bb, at, ORDER).mul(f).intoByteBuffer(bb, at, ORDER);
                }
                for (int c = full; c < cols; c++) {
                    bb.putFloat(base + c * 4, bb.getFloat(base + c * 4) * f);
                }
            }
        }

        private static ByteBuffer bytes(INDArray a) {
            if (a.offset() != 0 || a.isView()) {
                throw new IllegalStateException("VectorTileMath: tiles must be dedicated buffers");
            }
            return a.data().asNio().order(ORDER);
        }
    }
}
