package org.attn4j.ops.testing;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Plain float64 softmax attention, row by row from the definition: the yardstick for the flash op, the merge and
 * the attention layers. Slow and obvious on purpose.
 *
 * <p>Shapes: q {@code [B, H, Nq, D]}, k and v {@code [B, Hkv, Nk, D]} with {@code H} a multiple of {@code Hkv} (query
 * head {@code h} reads K/V head {@code h / (H / Hkv)}); any data type, read as float64. The mask's rules (causal,
 * sliding window, key padding {@code [B, Nk]}, documents: equal ids, neither negative, all by the global positions
 * the mask gives) are written out again
 * here, independently of {@link AttentionMask#allows}. A query that sees no key has output 0 and LSE {@code -inf}.
 *
 * <pre>
 * s_ij = scale q_i . k_j   (-inf where masked)     lse_i = log sum_j exp(s_ij)     p_ij = exp(s_ij - lse_i)
 * o_i  = sum_j p_ij v_j
 * dv_j = sum_i p_ij g_i    ds_ij = p_ij (g_i . v_j - g_i . o_i)    dq_i = scale sum_j ds_ij k_j
 * dk_j = scale sum_i ds_ij q_i
 * </pre>
 */
public final class ReferenceAttention {

    private final double[][][][] o;
    private final double[][][] lse;
    private final double[][][][] dq;
    private final double[][][][] dk;
    private final double[][][][] dv;
    private final boolean backward;

    /**
     * Forward and, if {@code dOut} ({@code [B, H, Nq, D]}) is not null, backward.
     *
     * @param mask the rules and global positions; {@link AttentionMask#none()} for none
     */
    public ReferenceAttention(INDArray qa, INDArray ka, INDArray va, INDArray dOut, AttentionMask mask,
                              double scale) {
        double[][][][] q = toJava(qa);
        double[][][][] k = toJava(ka);
        double[][][][] v = toJava(va);
        double[][][][] g = dOut == null ? null : toJava(dOut);
        backward = g != null;
        int bs = q.length;
        int h = q[0].length;
        int n = q[0][0].length;
        int d = q[0][0][0].length;
        int hkv = k[0].length;
        int nk = k[0][0].length;
        int[] qp = mask.queryPositions() != null ? mask.queryPositions() : iota(n);
        int[] kp = mask.keyPositions() != null ? mask.keyPositions() : iota(nk);
        INDArray pad = mask.keyPadding();
        Documents docs = mask.documents();
        o = new double[bs][h][n][d];
        lse = new double[bs][h][n];
        dq = new double[bs][h][n][d];
        dk = new double[bs][hkv][nk][d];
        dv = new double[bs][hkv][nk][d];
        for (int b = 0; b < bs; b++) {
            for (int hh = 0; hh < h; hh++) {
                int hk = hh / (h / hkv);
                for (int i = 0; i < n; i++) {
                    double[] s = new double[nk];
                    for (int j = 0; j < nk; j++) {
                        boolean ok = visible(mask.isCausal(), mask.window(), qp[i], kp[j])
                                && (pad == null || pad.getDouble(b, j) != 0)
                                && (docs == null || docs.id(b, qp[i]) >= 0 && docs.id(b, qp[i]) == docs.id(b, kp[j]));
                        s[j] = ok ? scale * dot(q[b][hh][i], k[b][hk][j]) : Double.NEGATIVE_INFINITY;
                    }
                    double[] p = new double[nk];
                    lse[b][hh][i] = softmaxRow(s, v[b][hk], p, o[b][hh][i]);
                    if (g == null || lse[b][hh][i] == Double.NEGATIVE_INFINITY) {
                        continue;
                    }
                    double delta = dot(g[b][hh][i], o[b][hh][i]);
                    for (int j = 0; j < nk; j++) {
                        if (p[j] == 0) {
                            continue;
                        }
                        double ds = p[j] * (dot(g[b][hh][i], v[b][hk][j]) - delta);
                        for (int c = 0; c < d; c++) {
                            dq[b][hh][i][c] += scale * ds * k[b][hk][j][c];
                            dk[b][hk][j][c] += scale * ds * q[b][hh][i][c];
                            dv[b][hk][j][c] += p[j] * g[b][hh][i][c];
                        }
                    }
                }
            }
        }
    }

    /**
     * One head's attention over a block of keys from its scores: {@code (softmax(s) v, logsumexp(s))} row by row, the
     * partial result that attention merges combine.
     *
     * @param s scores {@code [rows, k]}, {@code -inf} where masked
     * @param v values {@code [k, d]}
     * @return O {@code [rows, d]} and LSE {@code [rows]}, float64 (a row without a finite score: 0 and {@code -inf})
     */
    public static INDArray[] overScores(INDArray s, INDArray v) {
        double[][] scores = s.castTo(DataType.DOUBLE).toDoubleMatrix();
        double[][] values = v.castTo(DataType.DOUBLE).toDoubleMatrix();
        double[][] o = new double[scores.length][values[0].length];
        double[] lse = new double[scores.length];
        for (int i = 0; i < scores.length; i++) {
            lse[i] = softmaxRow(scores[i], values, new double[values.length], o[i]);
        }
        return new INDArray[] {Nd4j.create(o), Nd4j.create(lse)};
    }

    /**
     * The softmax of one query's scores {@code s} (-inf = masked): writes {@code p = exp(s - lse)}, adds
     * {@code p v} to {@code o} and returns {@code lse = log sum exp s}; a row without a finite score leaves both
     * untouched and returns {@code -inf}.
     */
    private static double softmaxRow(double[] s, double[][] v, double[] p, double[] o) {
        double max = Double.NEGATIVE_INFINITY;
        for (double x : s) {
            max = Math.max(max, x);
        }
        if (max == Double.NEGATIVE_INFINITY) {
            return Double.NEGATIVE_INFINITY;
        }
        double sum = 0;
        for (double x : s) {
            sum += Math.exp(x - max);
        }
        double lse = max + Math.log(sum);
        for (int j = 0; j < s.length; j++) {
            p[j] = Math.exp(s[j] - lse);
            for (int c = 0; c < o.length; c++) {
                o[c] += p[j] * v[j][c];
            }
        }
        return lse;
    }

    /** O {@code [B, H, Nq, D]}, float64. */
    public INDArray output() {
        return Nd4j.create(o);
    }

    /** The log-sum-exp of each query's scores {@code [B, H, Nq]}, float64; {@code -inf} where no key is visible. */
    public INDArray lse() {
        return Nd4j.create(lse);
    }

    /** dQ {@code [B, H, Nq, D]}, float64. @throws IllegalStateException without dOut */
    public INDArray dq() {
        return Nd4j.create(gradient(dq));
    }

    /** dK {@code [B, Hkv, Nk, D]}, float64, summed over the query heads of each K/V head. */
    public INDArray dk() {
        return Nd4j.create(gradient(dk));
    }

    /** dV {@code [B, Hkv, Nk, D]}, float64, summed over the query heads of each K/V head. */
    public INDArray dv() {
        return Nd4j.create(gradient(dv));
    }

    private double[][][][] gradient(double[][][][] x) {
        if (!backward) {
            throw new IllegalStateException("ReferenceAttention: gradients need dOut, which was null");
        }
        return x;
    }

    /** Whether a query at global position {@code i} sees the key at {@code j} (window 0 = none). */
    private static boolean visible(boolean causal, int window, int i, int j) {
        if (causal && j > i) {
            return false;
        }
        if (window == 0) {
            return true;
        }
        int distance = causal ? i - j : Math.abs(i - j);
        return distance < window;
    }

    private static double dot(double[] a, double[] b) {
        double s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i] * b[i];
        }
        return s;
    }

    private static int[] iota(int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) {
            p[i] = i;
        }
        return p;
    }

    /** A rank-4 array as {@code double[][][][]} (row-major). */
    static double[][][][] toJava(INDArray a) {
        long[] sh = a.shape();
        double[] flat = a.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        double[][][][] out = new double[(int) sh[0]][(int) sh[1]][(int) sh[2]][(int) sh[3]];
        int idx = 0;
        for (double[][][] x : out) {
            for (double[][] y : x) {
                for (double[] z : y) {
                    for (int c = 0; c < z.length; c++) {
                        z[c] = flat[idx++];
                    }
                }
            }
        }
        return out;
    }
}
