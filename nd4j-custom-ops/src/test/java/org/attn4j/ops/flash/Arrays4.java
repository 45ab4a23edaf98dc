package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Seeded inputs and relative-error assertions shared by the op tests. */
final class Arrays4 {

    private Arrays4() {
    }

    static INDArray randn(long seed, DataType type, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(seed).nextGaussian(shape).castTo(type);
    }

    /** max |actual - expected| / max |expected| over the finite entries; -inf must match exactly. */
    static double relativeError(INDArray actual, INDArray expected) {
        double[] a = actual.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        double[] e = expected.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        assertEquals(e.length, a.length, "length");
        double maxDiff = 0;
        double maxRef = 0;
        for (int i = 0; i < e.length; i++) {
            if (Double.isInfinite(e[i])) {
                if (a[i] != e[i]) {
                    return Double.POSITIVE_INFINITY;
                }
                continue;
            }
            if (Double.isNaN(a[i])) {
                return Double.NaN;
            }
            maxDiff = Math.max(maxDiff, Math.abs(a[i] - e[i]));
            maxRef = Math.max(maxRef, Math.abs(e[i]));
        }
        return maxRef == 0 ? maxDiff : maxDiff / maxRef;
    }

    static void assertClose(String what, INDArray actual, INDArray expected, double tol, String context) {
        double err = relativeError(actual, expected);
        if (!(err <= tol)) {
            fail(what + ": relative error " + err + " > " + tol + " (" + context + ")");
        }
    }

    static void assertNoNaN(String what, INDArray a) {
        double[] x = a.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        for (double v : x) {
            assertTrue(!Double.isNaN(v), what + " has NaN");
        }
    }
}
