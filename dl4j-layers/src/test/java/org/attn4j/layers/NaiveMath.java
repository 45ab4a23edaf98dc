package org.attn4j.layers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Plain float64 arithmetic for the reference tests, which compute the layers by their definitions. */
final class NaiveMath {

    private NaiveMath() {
    }

    /** The projections' weights and biases of the network's layer 0, as float64. */
    record Projections(double[][] wq, double[] bq, double[][] wk, double[] bk, double[][] wv, double[] bv,
                       double[][] wo, double[] bo) {
        static Projections of(MultiLayerNetwork net) {
            return new Projections(matrix(net.getParam("0_Wq")), vector(net.getParam("0_bq")),
                    matrix(net.getParam("0_Wk")), vector(net.getParam("0_bk")),
                    matrix(net.getParam("0_Wv")), vector(net.getParam("0_bv")),
                    matrix(net.getParam("0_Wo")), vector(net.getParam("0_bo")));
        }
    }

    /** Sequence {@code b} of {@code x} ({@code [B, F, N]} NCW or {@code [B, N, F]} NWC) as {@code [N][F]}. */
    static double[][] steps(INDArray x, RNNFormat format, int b) {
        boolean ncw = format == RNNFormat.NCW;
        int n = (int) x.size(ncw ? 2 : 1);
        int features = (int) x.size(ncw ? 1 : 2);
        double[][] out = new double[n][features];
        for (int t = 0; t < n; t++) {
            for (int f = 0; f < features; f++) {
                out[t][f] = at(x, format, b, t, f);
            }
        }
        return out;
    }

    /** Element (sequence {@code b}, step {@code t}, feature {@code f}) of {@code a} in {@code format}. */
    static double at(INDArray a, RNNFormat format, int b, int t, int f) {
        return format == RNNFormat.NCW ? a.getDouble(b, f, t) : a.getDouble(b, t, f);
    }

    /**
     * Asserts that {@code actual} ({@code [B, F, N]} NCW or {@code [B, N, F]} NWC) has the shape of
     * {@code expected[b][t][f]} and its values within {@code tol}.
     */
    static void assertMatches(double[][][] expected, INDArray actual, RNNFormat format, double tol, String what) {
        int mb = expected.length;
        int n = expected[0].length;
        int features = expected[0][0].length;
        long[] shape = format == RNNFormat.NCW ? new long[] {mb, features, n} : new long[] {mb, n, features};
        assertArrayEquals(shape, actual.shape(), "output shape for " + what);
        for (int b = 0; b < mb; b++) {
            for (int t = 0; t < n; t++) {
                for (int f = 0; f < features; f++) {
                    assertEquals(expected[b][t][f], at(actual, format, b, t, f), tol,
                            "output [b=" + b + ", t=" + t + ", f=" + f + "] for " + what);
                }
            }
        }
    }

    /** {@code in w + bias} per row of {@code in}. */
    static double[][] affine(double[][] in, double[][] w, double[] bias) {
        double[][] out = new double[in.length][bias.length];
        for (int r = 0; r < in.length; r++) {
            for (int o = 0; o < bias.length; o++) {
                double acc = bias[o];
                for (int i = 0; i < w.length; i++) {
                    acc += in[r][i] * w[i][o];
                }
                out[r][o] = acc;
            }
        }
        return out;
    }

    /**
     * Per-sequence rows {@code rows[b][t][h * hs + d]} (the heads side by side, as the projections give them) as
     * {@code [B, heads, N, hs]} float64, the layout of the ops.
     */
    static INDArray heads(double[][][] rows, int heads, int hs) {
        double[][][][] out = new double[rows.length][heads][rows[0].length][hs];
        for (int b = 0; b < rows.length; b++) {
            for (int h = 0; h < heads; h++) {
                for (int t = 0; t < rows[b].length; t++) {
                    System.arraycopy(rows[b][t], h * hs, out[b][h][t], 0, hs);
                }
            }
        }
        return Nd4j.create(out);
    }

    /** Sequence {@code b} of {@code [B, H, N, hs]} with the heads side by side again: {@code [N][H * hs]}. */
    static double[][] merged(INDArray heads, int b) {
        int h = (int) heads.size(1);
        int n = (int) heads.size(2);
        int hs = (int) heads.size(3);
        double[][] out = new double[n][h * hs];
        for (int hh = 0; hh < h; hh++) {
            for (int t = 0; t < n; t++) {
                for (int d = 0; d < hs; d++) {
                    out[t][hh * hs + d] = heads.getDouble(b, hh, t, d);
                }
            }
        }
        return out;
    }

    static double[][] matrix(INDArray a) {
        return a.castTo(DataType.DOUBLE).toDoubleMatrix();
    }

    static double[] vector(INDArray a) {
        return a.castTo(DataType.DOUBLE).toDoubleVector();
    }
}
