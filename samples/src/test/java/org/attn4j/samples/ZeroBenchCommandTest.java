package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A tiny {@code attn4j bench zero} run: per-worker state halves from one worker to two under stages 1 and up. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ZeroBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void optimizerStateHalvesWithTwoWorkersFromStageOne() throws Exception {
        CliRun run = CliRun.of("bench", "zero", "--workers", "1,2", "--width", "16", "--blocks", "1",
                "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-zero.csv"));
        assertEquals(1 + 4 * 2, csv.size(), String.join("\n", csv));
        for (int stage = 0; stage <= 3; stage++) {
            long[] one = row(csv, 1, stage);
            long[] two = row(csv, 2, stage);
            long expectState = stage >= 1 ? (one[0] + 1) / 2 : one[0];
            assertTrue(Math.abs(two[0] - expectState) <= 8, "stage " + stage + " state " + two[0] + " vs " + one[0]);
            long expectGradient = stage >= 2 ? (one[1] + 1) / 2 : one[1];
            assertTrue(Math.abs(two[1] - expectGradient) <= 4, "stage " + stage + " gradient");
        }
        assertTrue(Files.readString(tmp.resolve("benchmarks.md")).contains("<!-- bench:zero:start -->"));
    }

    private static long[] row(List<String> csv, int workers, int stage) {
        for (String line : csv.subList(1, csv.size())) {
            String[] f = line.split(",");
            if (Integer.parseInt(f[0]) == workers && Integer.parseInt(f[1]) == stage) {
                return new long[] {Long.parseLong(f[3]), Long.parseLong(f[4])};
            }
        }
        throw new AssertionError("no row for " + workers + " workers, stage " + stage);
    }
}
