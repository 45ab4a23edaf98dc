package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Optional;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * {@link ResidentPages}: released pages read 0 and nothing around them changes; off Linux or off ND4J's CPU
 * backend (CUDA: the host pages are a copy of device memory) releasing is refused in one line naming what was found
 * and what is needed. The backend of a test JVM cannot be switched, so the refusal is checked through
 * {@link ResidentPages#unavailable(String, boolean, boolean, String)}, the decision apart from where it looks.
 */
class ResidentPagesTest {

    private static final String CUDA = "org.nd4j.linalg.jcublas.JCublasBackend";

    @Test
    void refusesToReleaseOffTheCpuBackendInOneLineNamingTheBackend() {
        Optional<String> why = ResidentPages.unavailable("Linux", true, false, CUDA);
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> ResidentPages.requireReleasable(why));
        String m = e.getMessage();
        assertTrue(m.startsWith("ResidentPages: "), m);
        assertTrue(m.contains("CPU backend (nd4j-native)") && m.contains("found " + CUDA), m);
        assertFalse(m.contains("\n"), m);
    }

    @Test
    void refusesToReleaseOffLinuxInOneLineNamingTheSystem() {
        Optional<String> why = ResidentPages.unavailable("Mac OS X", false, true, "");
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> ResidentPages.requireReleasable(why));
        assertTrue(e.getMessage().contains("Linux") && e.getMessage().contains("Mac OS X"), e.getMessage());
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
    }

    @Test
    void linuxWithTheCpuBackendCanRelease() {
        assertEquals(Optional.empty(), ResidentPages.unavailable("Linux", true, true, ""));
    }

    @Test
    void releasedPagesReadZeroAndTheirNeighboursKeepTheirValues() {
        assumeTrue(ResidentPages.unavailable().isEmpty(), () -> "pages cannot be released here: "
                + ResidentPages.unavailable().orElse(""));
        long page = ResidentPages.pageBytes();
        int n = (int) (8 * page / Double.BYTES);
        INDArray v = Nd4j.linspace(DataType.DOUBLE, 1, n, 1);
        long from = n / 4 + 3;                     // not on a page boundary
        long to = 3L * n / 4 - 5;
        long released = ResidentPages.release(v, from, to);
        assertTrue(released >= 2 * page && released % page == 0, "released " + released + " bytes");
        double[] after = v.toDoubleVector();
        long zeros = 0;
        for (int i = 0; i < n; i++) {
            if (i < from || i >= to) {
                assertEquals(i + 1, after[i], 0.0, "element " + i + " outside the range keeps its value");
            } else if (after[i] == 0.0) {
                zeros++;
            } else {
                assertEquals(i + 1, after[i], 0.0, "element " + i + " inside the range: its value or 0");
            }
        }
        assertEquals(released / Double.BYTES, zeros, "every released element, and only those, reads 0");
    }
}
