package org.attn4j.ops.testing;

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
            for (int h = 0; h < hs; h++) {
                int hk = h / group;
                double lambda = causal ? decay.lambda(h) : 1.0;
                double[][][] states = new double[n][][];
                double[][] kv = copy(kvIn[b][h]);
                if (!causal) {
                    for (int s = 0; s < n; s++) {
                        addOuter(kv, k[b][hk][s], v[b][hk][s]);
                    }
                }
                for (int s = 0; s < n; s++) {
                    if (causal) {
                        scale(kv, lambda);
                        addOuter(kv, k[b][hk][s], v[b][hk][s]);
                    }
                    states[s] = copy(kv);
                    o[b][h][s] = vecMat(q[b][h][s], kv);
                }
                kvOut[b][h] = copy(kv);
                if (g == null) {
                    continue;
                }
                double[][] hGrad = copy(dKvOut[b][h]);
                double[][] total = new double[d][d];
                for (int s = n - 1; s >= 0; s--) {
                    double[][] gs = causal ? copy(hGrad) : total;
                    addOuter(gs, q[b][h][s], g[b][h][s]);
                    dq[b][h][s] = matVec(states[s], g[b][h][s]);
                    if (causal) {
                        accumulate(dk[b][hk][s], matVec(gs, v[b][hk][s]));
                        accumulate(dv[b][hk][s], vecMat(k[b][hk][s], gs));
                        hGrad = gs;
                        scale(hGrad, lambda);
                    }
                }
                if (causal) {
                    dKvIn[b][h] = hGrad;
                } else {
                    double[][] gs = total;
                    add(gs, dKvOut[b][h]);
                    for (int s = 0; s < n; s++) {
                        accumulate(dk[b][hk][s], matVec(gs, v[b][hk][s]));
                        accumulate(dv[b][hk][s], vecMat(k[b][hk][s], gs));
                    }
                    dKvIn[b][h] = gs;
                }
            }
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
