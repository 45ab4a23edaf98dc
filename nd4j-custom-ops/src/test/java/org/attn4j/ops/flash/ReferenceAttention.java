package org.attn4j.ops.flash;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Plain float64 softmax attention, row by row from the definition, with the same mask rules as
 * {@link AttentionMask}. Slow and obvious on purpose: the yardstick for the op.
 */
final class ReferenceAttention {

    final double[][][][] o;
    final double[][][] lse;
    final double[][][][] dq;
    final double[][][][] dk;
    final double[][][][] dv;

    /** Forward and, if {@code dOut} is not null, backward. */
    ReferenceAttention(INDArray qa, INDArray ka, INDArray va, INDArray dOut, AttentionMask mask, double scale) {
        double[][][][] q = toJava(qa);
        double[][][][] k = toJava(ka);
        double[][][][] v = toJava(va);
        double[][][][] g = dOut == null ? null : toJava(dOut);
        int bs = q.length;
        int h = q[0].length;
        int n = q[0][0].length;
        int d = q[0][0][0].length;
        int hkv = k[0].length;
        int nk = k[0][0].length;
        int[] qp = mask.queryPositionsOrDefault(n);
        int[] kp = mask.keyPositionsOrDefault(nk);
        INDArray pad = mask.keyPadding();
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
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j < nk; j++) {
                        boolean ok = visible(mask.isCausal(), mask.window(), qp[i], kp[j])
                                && (pad == null || pad.getDouble(b, j) != 0);
                        s[j] = ok ? scale * dot(q[b][hh][i], k[b][hk][j]) : Double.NEGATIVE_INFINITY;
                        max = Math.max(max, s[j]);
                    }
                    if (max == Double.NEGATIVE_INFINITY) {
                        lse[b][hh][i] = Double.NEGATIVE_INFINITY;
                        continue;
                    }
                    double sum = 0;
                    for (int j = 0; j < nk; j++) {
                        sum += Math.exp(s[j] - max);
                    }
                    lse[b][hh][i] = max + Math.log(sum);
                    double[] p = new double[nk];
                    for (int j = 0; j < nk; j++) {
                        p[j] = Math.exp(s[j] - lse[b][hh][i]);
                        for (int c = 0; c < d; c++) {
                            o[b][hh][i][c] += p[j] * v[b][hk][j][c];
                        }
                    }
                    if (g == null) {
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

    /** The mask rules written out again, independently of {@link AttentionMask#allows}. */
    static boolean visible(boolean causal, int window, int i, int j) {
        if (causal && j > i) {
            return false;
        }
        if (window == 0) {
            return true;
        }
        int distance = causal ? i - j : Math.abs(i - j);
        return distance < window;
    }

    static double dot(double[] a, double[] b) {
        double s = 0;
        for (int i = 0; i < a.length; i++) {
            s += a[i] * b[i];
        }
        return s;
    }

    static double[][][][] toJava(INDArray a) {
        INDArray c = a.castTo(DataType.DOUBLE).dup('c');
        int[] sh = new int[] {(int) a.size(0), (int) a.size(1), (int) a.size(2), (int) a.size(3)};
        double[] flat = c.data().asDouble();
        double[][][][] out = new double[sh[0]][sh[1]][sh[2]][sh[3]];
        int idx = 0;
        for (int i = 0; i < sh[0]; i++) {
            for (int j = 0; j < sh[1]; j++) {
                for (int l = 0; l < sh[2]; l++) {
                    for (int m = 0; m < sh[3]; m++) {
                        out[i][j][l][m] = flat[idx++];
                    }
                }
            }
        }
        return out;
    }

    static INDArray toNd(double[][][][] a) {
        return Nd4j.create(a);
    }

    static INDArray toNd(double[][][] a) {
        return Nd4j.create(a);
    }
}
