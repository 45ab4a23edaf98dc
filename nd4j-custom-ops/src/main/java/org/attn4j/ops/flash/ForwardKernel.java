package org.attn4j.ops.flash;

import java.util.HashMap;
import java.util.Map;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.impl.reduce.same.Max;
import org.nd4j.linalg.api.ops.impl.transforms.strict.Exp;
import org.nd4j.linalg.factory.Nd4j;

/**
 * FlashAttention-2 forward for one query block of one (batch, head): the key blocks stream past with
 * the online softmax (running row max {@code m}, row sum {@code l}, unnormalised accumulator), the
 * output is normalised once at the end and {@code LSE = m + log(l)} is kept for the backward pass.
 * One instance per worker thread: it owns its tile buffers, so peak extra memory is O(tile^2).
 *
 * <p>Row bookkeeping ({@code m}, {@code l}, rescale factors) is done in Java arrays; the matrix work is
 * gemm, and the row-wise subtraction of {@code m} is a rank-1 gemm, which measured about 35 times
 * faster than ND4J's broadcast subtraction on a 512 x 512 tile (DL4J-M2.1-FACTS.md).
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
    private final Map<Long, INDArray> buffers = new HashMap<>();

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
    }

    /** Computes rows {@code qb} of head {@code h} in sequence {@code b}. */
    void run(int b, int h, int qb) {
        int d = s.headDim();
        int rows = plan.queryRows(qb);
        long qRow0 = ((long) b * s.heads() + h) * s.queries() + plan.queryStart(qb);
        long kRow0 = ((long) b * s.kvHeads() + h / s.group()) * s.keys();
        INDArray qi = Views.matrix(q, qRow0 * d, rows, d);
        INDArray acc = buffer(0, rows, d);
        acc.assign(0);
        double[] m = new double[rows];
        double[] l = new double[rows];
        java.util.Arrays.fill(m, Double.NEGATIVE_INFINITY);
        double[] shift = new double[rows];
        double[] alpha = new double[rows];

        for (int kb = 0; kb < plan.keyBlocks; kb++) {
            TilePlan.Kind kind = plan.kind(b, qb, kb);
            if (kind == TilePlan.Kind.SKIP) {
                continue;
            }
            int cols = plan.keyCols(kb);
            long kOff = (kRow0 + plan.keyStart(kb)) * d;
            INDArray kj = Views.matrix(k, kOff, cols, d);
            INDArray vj = Views.matrix(v, kOff, cols, d);
            INDArray scores = buffer(1, rows, cols);
            Nd4j.gemm(qi, kj, scores, false, true, scale, 0.0);
            if (kind == TilePlan.Kind.PARTIAL) {
                scores.addi(plan.bias(b, qb, kb, type));
            }
            INDArray tileMax = buffer(2, rows, 1);
            Nd4j.exec(new Max(scores, tileMax, 1));
            double[] tm = Views.get(tileMax, 0, rows);
            boolean rescale = false;
            for (int r = 0; r < rows; r++) {
                double mNew = Math.max(m[r], tm[r]);
                // A row that has seen no key yet keeps m = -inf; shifting by 0 keeps exp(-inf) = 0, not NaN.
                shift[r] = mNew == Double.NEGATIVE_INFINITY ? 0.0 : -mNew;
                alpha[r] = m[r] == mNew ? 1.0 : Math.exp(m[r] - mNew);
                rescale |= alpha[r] != 1.0;
                m[r] = mNew;
            }
            INDArray shiftCol = buffer(3, rows, 1);
            Views.put(shiftCol, shift, rows);
            Nd4j.gemm(shiftCol, ones(cols), scores, false, false, 1.0, 1.0);
            Nd4j.exec(new Exp(scores, scores));
            INDArray rowSum = buffer(4, rows, 1);
            Nd4j.gemm(scores, onesColumn(cols), rowSum, false, false, 1.0, 0.0);
            double[] rs = Views.get(rowSum, 0, rows);
            for (int r = 0; r < rows; r++) {
                l[r] = alpha[r] * l[r] + rs[r];
            }
            if (rescale) {
                INDArray alphaCol = buffer(5, rows, 1);
                Views.put(alphaCol, alpha, rows);
                acc.muliColumnVector(alphaCol);
            }
            Nd4j.gemm(scores, vj, acc, false, false, 1.0, 1.0);
        }

        double[] inv = new double[rows];
        double[] rowLse = new double[rows];
        for (int r = 0; r < rows; r++) {
            // l = 0 only for a row that saw no key: output 0, LSE -inf. NaN stays NaN.
            inv[r] = l[r] == 0.0 ? 0.0 : 1.0 / l[r];
            rowLse[r] = l[r] == 0.0 ? Double.NEGATIVE_INFINITY : m[r] + Math.log(l[r]);
        }
        INDArray invCol = buffer(5, rows, 1);
        Views.put(invCol, inv, rows);
        acc.muliColumnVector(invCol);
        Views.matrix(out, qRow0 * d, rows, d).assign(acc);
        Views.set(lse, qRow0, rowLse, rows);
    }

    private INDArray ones(int cols) {
        INDArray o = buffers.get(key(6, 1, cols));
        if (o == null) {
            o = Nd4j.ones(type, 1, cols);
            buffers.put(key(6, 1, cols), o);
        }
        return o;
    }

    private INDArray onesColumn(int cols) {
        INDArray o = buffers.get(key(7, cols, 1));
        if (o == null) {
            o = Nd4j.ones(type, cols, 1);
            buffers.put(key(7, cols, 1), o);
        }
        return o;
    }

    private INDArray buffer(int slot, int rows, int cols) {
        return buffers.computeIfAbsent(key(slot, rows, cols), x -> Nd4j.create(type, rows, cols));
    }

    private static long key(int slot, int rows, int cols) {
        return ((long) slot << 58) | ((long) rows << 29) | cols;
    }
}
