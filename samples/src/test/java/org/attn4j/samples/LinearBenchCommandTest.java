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

/** A tiny {@code attn4j bench linear} run: every N and variant in every round, the files written; no timing. */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class LinearBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void timesEveryLengthAndVariantInEveryRound() throws Exception {
        CliRun run = CliRun.of("bench", "linear", "--min-n", "2048", "--max-n", "8192", "--rounds", "3",
                "--min-seconds", "0", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-linear.csv"));
        assertEquals("n,impl,pass,median_ms,us_per_token,rounds,calls_per_round,round_mean_ms,paired_ratio,"
                + "round_paired_ratio,round_first_call_ms,peak_increase_bytes,note", csv.get(0));
        for (int n : new int[] {2048, 4096, 8192}) {
            for (String impl : new String[] {"linear", "linear-ws", "linear-ws-1t"}) {
                for (String pass : new String[] {"fwd", "fwd+bwd"}) {
                    String prefix = n + "," + impl + "," + pass + ",";
                    String row = csv.stream().filter(l -> l.startsWith(prefix)).findFirst()
                            .orElseThrow(() -> new AssertionError(prefix + " missing\n" + csv));
                    String[] f = row.split(",");
                    assertEquals("3", f[5], "rounds: " + row);
                    assertEquals(3, f[7].split(" ").length, "one mean per round: " + row);
                    // From 4096 up every round is paired with the reference N (8192 here) timed around it.
                    assertEquals(n >= 4096 ? 3 : 0, f[9].isEmpty() ? 0 : f[9].split(" ").length, "paired: " + row);
                    if (n == 8192) {
                        double ratio = Double.parseDouble(f[8]);
                        assertTrue(ratio > 0.2 && ratio < 5, "the reference against itself: " + row);
                    }
                    assertEquals(3, f[10].split(" ").length, "one untimed first call per round: " + row);
                    assertTrue(row.endsWith(",\"\""), "finished: " + row);
                }
            }
        }
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("2048,flash,fwd,")), "flash beside linear\n" + csv);
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("Time per token, linear (fresh outputs) fwd+bwd, N = 4096 to 8192")
                && md.contains("within single rounds max/min") && md.contains("3 interleaved rounds")
                && md.contains("fastest round of each N: max/min") && md.contains("Peak memory rise per token")
                && md.contains("N = 4096 to 8192: paired with N = 8192, max/min = ")
                && md.contains("trend through every paired round (least squares on log N): ")
                && md.contains("First call of each round at N = 8192"), md);
    }

    @Test
    void rejectsNoRounds() throws Exception {
        CliRun run = CliRun.of("bench", "linear", "--rounds", "0", "--out", tmp.toString());
        assertTrue(run.exitCode() != 0);
        assertTrue(run.err().contains("--rounds >= 1, got 256, 1048576, 0"), run.err());
    }
}
