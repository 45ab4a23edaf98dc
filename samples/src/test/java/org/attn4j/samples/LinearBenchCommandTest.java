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
                "--min-seconds", "0", "--window-tokens", "16384", "--warm-up", "0.5", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-linear.csv"));
        assertEquals("n,impl,pass,median_ms,us_per_token,rounds,calls_per_round,round_mean_ms,"
                + "round_first_call_ms,peak_increase_bytes,note", csv.get(0));
        for (int n : new int[] {2048, 4096, 8192}) {
            for (String impl : new String[] {"linear", "linear-ws", "linear-ws-1t"}) {
                for (String pass : new String[] {"fwd", "fwd+bwd"}) {
                    String prefix = n + "," + impl + "," + pass + ",";
                    String row = csv.stream().filter(l -> l.startsWith(prefix)).findFirst()
                            .orElseThrow(() -> new AssertionError(prefix + " missing\n" + csv));
                    String[] f = row.split(",");
                    assertEquals("3", f[5], "rounds: " + row);
                    assertEquals(3, f[7].split(" ").length, "one mean per round: " + row);
                    // From 4096 up every window holds --window-tokens tokens; below, at least one call.
                    assertEquals(n >= 4096 ? Integer.toString(16384 / n) : "1", f[6], "calls per window: " + row);
                    assertEquals(3, f[8].split(" ").length, "one untimed first call per round: " + row);
                    assertTrue(row.endsWith(",\"\""), "finished: " + row);
                }
            }
        }
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("2048,flash,fwd,")), "flash beside linear\n" + csv);
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        BenchMarkdown.assertMethodInOneParagraph(md, "Linear attention (causal, with decay) vs flash attention");
        assertTrue(md.contains("- Time per token from N = 4096 to 8192, fresh outputs: forward ")
                && md.contains("3 interleaved rounds") && md.contains("after both ops ran for 0.5 s")
                && md.contains("Peak memory rise per token")
                && md.contains("back-to-back calls that cover 16384 tokens from N = 4096 up"), md);
    }

    @Test
    void rejectsANegativeWindow() throws Exception {
        CliRun run = CliRun.of("bench", "linear", "--window-tokens", "-1", "--out", tmp.toString());
        assertTrue(run.exitCode() != 0);
        assertTrue(run.err().contains("--window-tokens must be >= 0 (0: the largest N), got -1"), run.err());
    }

    @Test
    void rejectsNoRounds() throws Exception {
        CliRun run = CliRun.of("bench", "linear", "--rounds", "0", "--out", tmp.toString());
        assertTrue(run.exitCode() != 0);
        assertTrue(run.err().contains("--rounds >= 1, got 256, 1048576, 0"), run.err());
    }
}
