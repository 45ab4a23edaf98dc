package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.attn4j.samples.bench.SizeTrend;
import org.junit.jupiter.api.Test;

class SizeTrendTest {

    private static final int[] N = {4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576};

    /** Ratios growing by {@code perDoubling} per doubling of N, times noise of {@code sigma} in log space. */
    private static double[][] ratios(double perDoubling, double sigma, int rounds, long seed) {
        Random random = new Random(seed);
        double[][] r = new double[N.length][rounds];
        for (int i = 0; i < N.length; i++) {
            for (int k = 0; k < rounds; k++) {
                r[i][k] = Math.pow(perDoubling, i) * Math.exp(sigma * random.nextGaussian());
            }
        }
        return r;
    }

    @Test
    void noiselessGrowthIsReadExactly() {
        // 8 doublings from 4K to 1M at 1 % each: 1.01^8 - 1 = 8.29 %.
        SizeTrend t = SizeTrend.fit(N, ratios(1.01, 0, 5, 1), 7);
        assertEquals(Math.pow(1.01, 8) - 1, t.change(), 1e-12);
        assertEquals(t.change(), t.low(), 1e-12);
        assertEquals(t.change(), t.high(), 1e-12);
    }

    @Test
    void intervalHoldsTheTrueTrendUnderNoise() {
        // The machine's noise in one bench run: times per token spread about 30 % in log space, 15 rounds.
        SizeTrend flat = SizeTrend.fit(N, ratios(1.0, 0.3, 15, 2), 7);
        assertTrue(flat.low() < 0 && flat.high() > 0, "a flat op's interval holds 0: " + flat);
        SizeTrend growing = SizeTrend.fit(N, ratios(1.05, 0.05, 15, 3), 7);
        assertTrue(growing.low() > 0.3 && growing.change() > growing.low() && growing.high() > growing.change()
                && growing.low() < 0.477 && growing.high() > 0.477, "5 % per doubling is 47.7 % over 8: " + growing);
    }

    @Test
    void theSameSeedGivesTheSameInterval() {
        double[][] r = ratios(1.0, 0.2, 9, 4);
        assertEquals(SizeTrend.fit(N, r, 11), SizeTrend.fit(N, r, 11));
    }

    @Test
    void rejectsWhatCannotBeFitted() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> SizeTrend.fit(new int[] {4096, 4096}, new double[][] {{1.0}, {1.1}}, 1));
        assertTrue(e.getMessage().contains("two distinct N"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> SizeTrend.fit(new int[] {4096, 8192}, new double[][] {{1.0}, {0.0}}, 1));
        assertTrue(e.getMessage().contains("expected a positive finite time"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> SizeTrend.fit(new int[] {4096, 8192}, new double[][] {{1.0}, {}}, 1));
        assertTrue(e.getMessage().contains("at least one round"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> SizeTrend.fit(new int[] {4096}, new double[][] {{1.0}, {1.0}}, 1));
        assertTrue(e.getMessage().contains("1 lengths but 2 value lists"), e.getMessage());
    }
}
