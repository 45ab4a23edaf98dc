package org.attn4j.ops.testing;

import org.attn4j.ops.Documents;
import org.attn4j.ops.linear.Decay;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Plain float64 linear attention by its recurrence, step by step: the yardstick for the chunked linear attention op
 * and the linear attention layer.
 *
 * <pre>
 * causal:      kv_s = lambda_h kv_(s-1) + k_s v_s^T  (kv_(-1) = kvIn)      o_s = q_s^T kv_s
 * non-causal:  kv   = kvIn + sum_s k_s v_s^T                               o_s = q_s^T kv
 * </pre>
 * With documents (ids by global position; the call holds positions {@code first ...}): causal, the step's decay
 * is multiplied by 1 if position s continues the document of position s - 1 (the same id, not negative; for
 * s = 0 the position before the call, and always 1 when the call starts the sequence), else by 0, and a padded
 * position adds nothing and outputs 0; non-causal, each document sums its own keys, {@code kvIn} joins the first
 * one when it continues, {@code kvOut} is the last one's (0 when the call ends in padding).
 *
 * <p>Shapes: q {@code [B, H, N, D]}, k and v {@code [B, Hkv, N, D]} with {@code H} a multiple of {@code Hkv}, the
 * state {@code [B, H, D, D]}; any data type, read as float64. Backward, when {@code dOut} is given, returns dQ, dK,
 * dV and the gradient of the incoming state, for the loss {@code sum(O * dOut) + <kvOut, dKvOut>}.
 */
public final class ReferenceLinearAttention {

    private final double[][][][] o;
    private final double[][][][] kvOut;
    private final double[][][][] dq;
    private final double[][][][] dk;
    private final double[][][][] dv;
    private final double[][][][] dKvIn;
    private final boolean backward;

    /** Forward only, from a zero state. */
    public ReferenceLinearAttention(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal) {
        this(q, k, v, null, null, null, decay, causal);
    }

    /**
     * Forward and, if {@code dOut} is not null, backward.
     *
     * @param kvIn   the incoming state {@code [B, H, D, D]}, or null for zeros
     * @param dOut   the gradient of O {@code [B, H, N, D]}, or null for forward only
     * @param dKvOut the gradient of the outgoing state {@code [B, H, D, D]}, or null for zeros
     * @param decay  lambda per query head; read only when {@code causal}
     */
    public ReferenceLinearAttention(INDArray qa, INDArray ka, INDArray va, INDArray dOut, INDArray kvInA,
                                    INDArray dKvOutA, Decay decay, boolean causal) {
        this(qa, ka, va, dOut, kvInA, dKvOutA, decay, causal, null, 0);
    }

    /** As above, for positions {@code first ...} of packed sequences with these documents (null = none). */
    public ReferenceLinearAttention(INDArray qa, INDArray ka, INDArray va, INDArray dOut, INDArray kvInA,
                                    INDArray dKvOutA, Decay decay, boolean causal, Documents docs, int first) {
        double[][][][] q = ReferenceAttention.toJava(qa);
        double[][][][] k = ReferenceAttention.toJava(ka);
        double[][][][] v = ReferenceAttention.toJava(va);
        int bs = q.length;
        int hs = q[0].length;
        int n = q[0][0].length;
        int d = q[0][0][0].length;
        double[][][][] g = dOut == null ? null : ReferenceAttention.toJava(dOut);
        double[][][][] kvIn = kvInA == null ? new double[bs][hs][d][d] : ReferenceAttention.toJava(kvInA);
        double[][][][] dKvOut = dKvOutA == null ? new double[bs][hs][d][d] : ReferenceAttention.toJava(dKvOutA);
        backward = g != null;
        int group = hs / k[0].length;
        o = new double[bs][hs][n][d];
        kvOut = new double[bs][hs][d][d];
        dq = new double[bs][hs][n][d];
        dk = new double[bs][k[0].length][n][d];
        dv = new double[bs][k[0].length][n][d];
        dKvIn = new double[bs][hs][d][d];
        for (int b = 0; b < bs; b++) {
            boolean[] real = new boolean[n];
            boolean[] continues = new boolean[n];
            for (int s = 0; s < n; s++) {
                int p = first + s;
                real[s] = docs == null || docs.id(b, p) >= 0;
                continues[s] = docs == null || (p == 0 ? real[s]
                        : real[s] && docs.id(b, p) == docs.id(b, p - 1));
            }
            for (int h = 0; h < hs; h++) {
                int hk = h / group;
                if (causal) {
                    causal(b, h, hk, q, k, v, g, kvIn, dKvOut, decay.lambda(h), real, continues);
                } else {
                    nonCausal(b, h, hk, q, k, v, g, kvIn, dKvOut, real, continues);
                }
            }
        }
    }

    private void causal(int b, int h, int hk, double[][][][] q, double[][][][] k, double[][][][] v,
                        double[][][][] g, double[][][][] kvIn, double[][][][] dKvOut, double lambda,
                        boolean[] real, boolean[] continues) {
        int n = q[0][0].length;
        int d = q[0][0][0].length;
        double[][][] states = new double[n][][];
        double[][] kv = copy(kvIn[b][h]);
        for (int s = 0; s < n; s++) {
            scale(kv, continues[s] ? lambda : 0.0);
            if (real[s]) {
                addOuter(kv, k[b][hk][s], v[b][hk][s]);
                o[b][h][s] = vecMat(q[b][h][s], kv);
            }
            states[s] = copy(kv);
        }
        kvOut[b][h] = copy(kv);
        if (g == null) {
            return;
        }
        double[][] hGrad = copy(dKvOut[b][h]);
        for (int s = n - 1; s >= 0; s--) {
            double[][] gs = copy(hGrad);
            if (real[s]) {
                addOuter(gs, q[b][h][s], g[b][h][s]);
                dq[b][h][s] = matVec(states[s], g[b][h][s]);
                accumulate(dk[b][hk][s], matVec(gs, v[b][hk][s]));
                accumulate(dv[b][hk][s], vecMat(k[b][hk][s], gs));
            }
            hGrad = gs;
            scale(hGrad, continues[s] ? lambda : 0.0);
        }
        dKvIn[b][h] = hGrad;
    }

    private void nonCausal(int b, int h, int hk, double[][][][] q, double[][][][] k, double[][][][] v,
                           double[][][][] g, double[][][][] kvIn, double[][][][] dKvOut, boolean[] real,
                           boolean[] continues) {
        int n = q[0][0].length;
        int d = q[0][0][0].length;
        int from = 0;
        while (from < n) {
            int to = from + 1;
            while (to < n && continues[to]) {
                to++;
            }
            boolean first = from == 0;
            boolean last = to == n;
            if (!real[from]) {                       // padding: a run of its own, nothing in or out
                if (last) {
                    kvOut[b][h] = new double[d][d];
                }
                from = to;
                continue;
            }
            double[][] kv = first && continues[0] ? copy(kvIn[b][h]) : new double[d][d];
            for (int s = from; s < to; s++) {
                addOuter(kv, k[b][hk][s], v[b][hk][s]);
            }
            for (int s = from; s < to; s++) {
                o[b][h][s] = vecMat(q[b][h][s], kv);
            }
            if (last) {
                kvOut[b][h] = copy(kv);
            }
            if (g != null) {
                double[][] gs = last ? copy(dKvOut[b][h]) : new double[d][d];
                for (int s = from; s < to; s++) {
                    addOuter(gs, q[b][h][s], g[b][h][s]);
                    dq[b][h][s] = matVec(kv, g[b][h][s]);
                }
                for (int s = from; s < to; s++) {
                    accumulate(dk[b][hk][s], matVec(gs, v[b][hk][s]));
                    accumulate(dv[b][hk][s], vecMat(k[b][hk][s], gs));
                }
                if (first && continues[0]) {
                    dKvIn[b][h] = gs;
                }
            }
            from = to;
        }
    }

    /** O {@code [B, H, N, D]}, float64. */
    public INDArray output() {
        return Nd4j.create(o);
    }

    /** The state after the last step {@code [B, H, D, D]}, float64. */
    public INDArray kvOut() {
        return Nd4j.create(kvOut);
    }

    /** dQ {@code [B, H, N, D]}, float64. @throws IllegalStateException without dOut */
    public INDArray dq() {
        return Nd4j.create(gradient(dq));
    }

    /** dK {@code [B, Hkv, N, D]}, float64, summed over the query heads of each K/V head. */
    public INDArray dk() {
        return Nd4j.create(gradient(dk));
    }

    /** dV {@code [B, Hkv, N, D]}, float64, summed over the query heads of each K/V head. */
    public INDArray dv() {
        return Nd4j.create(gradient(dv));
    }

    /** The gradient of the incoming state {@code [B, H, D, D]}, float64. */
    public INDArray dKvIn() {
        return Nd4j.create(gradient(dKvIn));
    }

    private double[][][][] gradient(double[][][][] x) {
        if (!backward) {
            throw new IllegalStateException("ReferenceLinearAttention: gradients need dOut, which was null");
        }
        return x;
    }

    private static double[][] copy(double[][] m) {
        double[][] c = new double[m.length][];
        for (int i = 0; i < m.length; i++) {
            c[i] = m[i].clone();
        }
        return c;
    }

    private static void scale(double[][] m, double f) {
        for (double[] r : m) {
            for (int j = 0; j < r.length; j++) {
                r[j] *= f;
            }
        }
    }

    private static void add(double[][] m, double[][] x) {
        for (int i = 0; i < m.length; i++) {
            for (int j = 0; j < m[i].length; j++) {
                m[i][j] += x[i][j];
            }
        }
    }

    /** {@code M += a b^T}. */
    private static void addOuter(double[][] m, double[] a, double[] b) {
        for (int i = 0; i < a.length; i++) {
            for (int j = 0; j < b.length; j++) {
                m[i][j] += a[i] * b[j];
            }
        }
    }

    /** {@code x^T M}. */
    private static double[] vecMat(double[] x, double[][] m) {
        double[] r = new double[m[0].length];
        for (int i = 0; i < x.length; i++) {
            for (int j = 0; j < r.length; j++) {
                r[j] += x[i] * m[i][j];
            }
        }
        return r;
    }

    /** {@code M x}. */
    private static double[] matVec(double[][] m, double[] x) {
        double[] r = new double[m.length];
        for (int i = 0; i < m.length; i++) {
            for (int j = 0; j < x.length; j++) {
                r[i] += m[i][j] * x[j];
            }
        }
        return r;
    }

    private static void accumulate(double[] into, double[] x) {
        for (int i = 0; i < into.length; i++) {
            into[i] += x[i];
        }
    }
}
