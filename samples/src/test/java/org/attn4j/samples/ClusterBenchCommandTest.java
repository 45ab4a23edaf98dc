package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.NamespaceCluster;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A tiny {@code attn4j bench cluster} run on rate-limited namespace hosts writes its table, with the bytes of the
 * ring's formula and a prediction beside every measurement; the times themselves are not tested. Skipped, with
 * the reason, where the process cannot create namespaces.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ClusterBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesMeasuredAndPlannedTimesPerAlgorithm() throws Exception {
        java.util.Optional<String> why = NamespaceCluster.unavailable();
        Assumptions.assumeTrue(why.isEmpty(), () -> "skipped: " + why.orElseThrow());
        CliRun run = CliRun.of("bench", "cluster", "--rates", "500", "--algos", "ring,ulysses", "-N", "64",
                "--heads", "4", "--kv-heads", "4", "--dim", "8", "--repeats", "1", "--warm-up", "0.2", "--out",
                tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-cluster.csv"));
        String all = String.join("\n", csv);
        assertEquals(3, csv.size(), all);
        // Ring, P = 4: X_q = X_kv = 1 * 4 * 16 * 8 * 4 = 2048 bytes, X_lse = 1 * 4 * 16 * 4 = 256; the paper's
        // volume (docs/algorithms.md) is what the ranks sent over the rate-limited links.
        SequenceAlgorithm.Volume ring = SequenceAlgorithm.byName("ring").volume(
                SequenceAlgorithm.Settings.of(4, 64, true), new SequenceAlgorithm.ShardBytes(2048, 2048, 256, 0), 0);
        long bytes = ring.forward() + ring.backward();
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("500,ring,zigzag,") && l.endsWith("," + bytes)), all);
        for (String line : csv.subList(1, csv.size())) {
            String[] f = line.split(",");
            for (int i = 3; i <= 7; i++) {
                assertTrue(Double.parseDouble(f[i]) > 0, "column " + i + " of " + line);
            }
        }
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("<!-- bench:cluster:start -->") && md.contains("| 500 Mbit/s | ring | zigzag |"), md);
        assertTrue(md.contains("- 500 Mbit/s: measured "), md);
        assertTrue(md.contains("once every worker has run the local attention op untimed for 0.2 s"),
                "the method names the warm-up that ran\n" + md);
        BenchMarkdown.assertMethodInOneParagraph(md, "Planned against measured, on rate-limited links");
    }
}
