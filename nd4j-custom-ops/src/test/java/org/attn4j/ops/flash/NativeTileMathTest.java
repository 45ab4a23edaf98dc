package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Arrays;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The native tile math against the Vector API one, operation by operation, on tiles with the cases their code
 * paths split on: widths that are and are not multiples of 16, rows that have seen no key, rows whose shift must
 * move (a score more than 2^8 above it) and rows where it may stay, masked (-inf) scores and NaN.
 */
class NativeTileMathTest {

    private static final int[] WIDTHS = {1, 15, 16, 17, 40, 64, 512, 517};

    /** The property that accepts a build and test run on Linux x86-64 without the native tile code (pom.xml). */
    static final String ALLOW_NO_NATIVE = "attn4j.allowNoNative";

    /**
     * On Linux x86-64 the native tile code must be what the CPU kernel runs: a build whose gcc step was skipped or
     * failed, a library that does not load or a CPU without AVX-512F fails here, naming the cause, unless
     * {@code -Dattn4j.allowNoNative=true} accepts it (then the test is skipped with the cause).
     */
    @Test
    void isInUseOnLinuxX8664UnlessABuildWithoutItIsAllowed() {
        String os = System.getProperty("os.name");
        String arch = System.getProperty("os.arch");
        assumeTrue(os.startsWith("Linux") && (arch.equals("amd64") || arch.equals("x86_64")),
                "the native tile code is built for Linux x86-64 only; this is " + os + " " + arch);
        TilePath path = TilePath.cpuKernel();
        if (!path.nativeInUse()) {
            assumeFalse(Boolean.getBoolean(ALLOW_NO_NATIVE), "native tile code not in use, accepted by -D"
                    + ALLOW_NO_NATIVE + "=true: " + path.nativeOff());
            fail("FlashAttention: the native tile code is not in use on this Linux x86-64 host: " + path.nativeOff()
                    + ". To build and test without it, set -D" + ALLOW_NO_NATIVE + "=true");
        }
        // In use: then the jar holds the library, the CPU has AVX-512F and the kernels get the native tile math.
        assertNotNull(NativeTileMath.class.getResource(NativeTileMath.RESOURCE), NativeTileMath.RESOURCE);
        assertTrue(cpuFlags().contains(" avx512f"), "AVX-512F in /proc/cpuinfo");
        assertTrue(TileMath.forType(DataType.FLOAT) instanceof NativeTileMath);
        assertNull(NativeTileMath.class.getResource(NativeTileMath.NOT_BUILT), "no note of a failed build beside it");
    }

    @Test
    void softmaxStepsAgreeWithTheJavaOnes() {
        assumeTrue(NativeTileMath.UNAVAILABLE == null, String.valueOf(NativeTileMath.UNAVAILABLE));
        TileMath nat = new NativeTileMath(VectorTileMath.create());
        TileMath java = VectorTileMath.create();
        Random random = new Random(7);
        for (int cols : WIDTHS) {
            int rows = 6;
            // Row shifts before the step: unseen, kept (scores stay within 2^8), moved (a score far above).
            double[] m0 = {Double.NEGATIVE_INFINITY, 3.0, 3.0, -20.0, Double.NEGATIVE_INFINITY, 1.0};
            float[] tile = new float[rows * cols];
            for (int i = 0; i < tile.length; i++) {
                tile[i] = (float) (2 * random.nextGaussian());
            }
            Arrays.fill(tile, 3 * cols, 4 * cols, Float.NEGATIVE_INFINITY);      // row 3: every key masked
            Arrays.fill(tile, 4 * cols, 5 * cols, Float.NEGATIVE_INFINITY);      // row 4: masked and unseen
            tile[2 * cols + cols / 2] = 40f;                                     // row 2: the shift must move
            tile[5 * cols + cols - 1] = Float.NaN;                               // row 5: NaN stays NaN
            double[][] nativeOut = softmax(nat, tile, rows, cols, m0);
            double[][] javaOut = softmax(java, tile, rows, cols, m0);
            // Row 5 (with a NaN) is NaN in its sum in both; its other values depend on where each met the NaN.
            assertTrue(Double.isNaN(javaOut[3][5]), "row 5's sum is NaN in the Java tile math, cols " + cols);
            for (int part = 0; part < 4; part++) {
                for (int i = 0; i < javaOut[part].length; i++) {
                    if ((part == 0 ? i / cols : i) == 5) {
                        continue;
                    }
                    double want = javaOut[part][i];
                    double got = nativeOut[part][i];
                    String at = "cols " + cols + ", part " + part + ", element " + i;
                    if (Double.isNaN(want) || Double.isInfinite(want)) {
                        assertEquals(want, got, at);
                    } else {
                        assertEquals(want, got, 2e-6 * Math.max(1.0, Math.abs(want)), at);
                    }
                }
            }
            assertTrue(Double.isNaN(nativeOut[3][5]), "row 5's sum is NaN, cols " + cols);
            assertEquals(0.0, nativeOut[3][3], "a row that sees no key sums to 0, cols " + cols);
            assertEquals(Double.NEGATIVE_INFINITY, nativeOut[1][4], "a row that sees no key keeps m = -inf");
        }
    }

    @Test
    void backwardStepsAndRowScalingAgreeWithTheJavaOnes() {
        assumeTrue(NativeTileMath.UNAVAILABLE == null, String.valueOf(NativeTileMath.UNAVAILABLE));
        TileMath nat = new NativeTileMath(VectorTileMath.create());
        TileMath java = VectorTileMath.create();
        Random random = new Random(11);
        for (int cols : WIDTHS) {
            int rows = 5;
            float[] scores = new float[rows * cols];
            float[] grads = new float[rows * cols];
            for (int i = 0; i < scores.length; i++) {
                scores[i] = (float) random.nextGaussian();
                grads[i] = (float) random.nextGaussian();
            }
            scores[0] = Float.NEGATIVE_INFINITY;
            INDArray shifts = Nd4j.createFromArray(new float[] {0.5f, -1f, -3f, 2f, 0f, 9f, -4f}).reshape(7);
            double[] factors = {0.5, 1.0, 0.0, 2.0, 0.125};

            INDArray pn = tile(scores, rows, cols);
            INDArray pj = tile(scores, rows, cols);
            nat.expShifted(pn, shifts, 2, rows, cols);
            java.expShifted(pj, shifts, 2, rows, cols);
            assertClose(pj, pn, "expShifted, cols " + cols);
            assertEquals(0f, pn.getFloat(0), "e^-inf is 0");

            INDArray dn = tile(grads, rows, cols);
            INDArray dj = tile(grads, rows, cols);
            nat.shiftedProduct(dn, pn, shifts, 1, rows, cols);
            java.shiftedProduct(dj, pj, shifts, 1, rows, cols);
            assertClose(dj, dn, "shiftedProduct, cols " + cols);

            nat.scaleRows(dn, 1, Arrays.copyOf(factors, rows - 1), rows - 1, cols);
            java.scaleRows(dj, 1, Arrays.copyOf(factors, rows - 1), rows - 1, cols);
            assertClose(dj, dn, "scaleRows, cols " + cols);
        }
    }

    /** Runs one softmax step on a copy of {@code tile}: {powers, m, alpha, row sums}. */
    private static double[][] softmax(TileMath math, float[] tile, int rows, int cols, double[] m0) {
        INDArray scores = tile(tile, rows, cols);
        double[] m = m0.clone();
        double[] alpha = new double[rows];
        double[] sum = new double[rows];
        math.softmaxStep(scores, rows, cols, m, alpha, sum);
        double[] powers = scores.dup().data().asDouble();
        return new double[][] {powers, m, alpha, sum};
    }

    private static INDArray tile(float[] values, int rows, int cols) {
        INDArray t = Nd4j.create(DataType.FLOAT, rows, cols);
        t.assign(Nd4j.createFromArray(values).reshape(rows, cols));
        return t;
    }

    private static void assertClose(INDArray want, INDArray got, String what) {
        float[] w = want.data().asFloat();
        float[] g = got.data().asFloat();
        assertEquals(w.length, g.length, what);
        for (int i = 0; i < w.length; i++) {
            assertEquals(w[i], g[i], 2e-6f * Math.max(1f, Math.abs(w[i])), what + ", element " + i);
        }
    }

    private static String cpuFlags() {
        try {
            return String.join("\n", java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/cpuinfo")));
        } catch (java.io.IOException | SecurityException e) {
            return "";
        }
    }
}
