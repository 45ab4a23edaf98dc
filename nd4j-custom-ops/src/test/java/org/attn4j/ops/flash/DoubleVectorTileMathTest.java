package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;

import org.junit.jupiter.api.Test;

import jdk.incubator.vector.DoubleVector;

/**
 * The float64 tile exponential on one value (a row's tail) gives the bits its vector form gives in every lane, and
 * stays within a few ulps of {@link Math#exp}.
 */
class DoubleVectorTileMathTest {

    @Test
    void scalarExpHasTheBitsOfTheVectorExp() {
        Random rnd = new Random(17);
        double[] x = new double[4096];
        double[] special = {0.0, -0.0, 1.0, -1.0, 709.0, 709.5, 1e300, -708.0, -708.0000001, -707.9999, -745.0,
            -1e300, Double.NEGATIVE_INFINITY, Double.POSITIVE_INFINITY, Double.NaN, Math.log(2) / 2,
            -Math.log(2) / 2, 1e-300, Double.MIN_VALUE};
        System.arraycopy(special, 0, x, 0, special.length);
        for (int i = special.length; i < x.length; i++) {
            x[i] = i % 2 == 0 ? (rnd.nextDouble() * 2 - 1) * 720 : rnd.nextGaussian() * 3;
        }
        int lanes = DoubleVector.SPECIES_PREFERRED.length();
        for (int i = 0; i + lanes <= x.length; i += lanes) {
            double[] v = DoubleVectorTileMath.exp(DoubleVector.fromArray(DoubleVector.SPECIES_PREFERRED, x, i))
                    .toArray();
            for (int l = 0; l < lanes; l++) {
                double s = DoubleVectorTileMath.exp(x[i + l]);
                assertEquals(Double.doubleToRawLongBits(v[l]), Double.doubleToRawLongBits(s),
                        "exp(" + x[i + l] + "): vector " + v[l] + ", scalar " + s);
                double ref = Math.exp(x[i + l]);
                if (x[i + l] >= -708 && x[i + l] <= 709) {
                    assertEquals(ref, s, 4 * Math.ulp(ref), "exp(" + x[i + l] + ")");
                }
            }
        }
    }
}
