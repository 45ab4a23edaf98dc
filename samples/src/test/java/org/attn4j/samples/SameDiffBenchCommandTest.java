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

/** A tiny {@code attn4j bench samediff} run: a finished row per function and N, the files written; no timing. */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class SameDiffBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesAFinishedRowPerFunctionAndLength() throws Exception {
        CliRun run = CliRun.of("bench", "samediff", "--lengths", "32,64", "--stock-max", "32", "--head-dim", "8",
                "--repeats", "1", "--heap", "1g", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-samediff.csv"));
        assertEquals("kind,n,head_dim,median_ms,baseline_bytes,peak_bytes,failure", csv.get(0));
        for (String row : new String[] {"flash,32,8,", "linear,32,8,", "stock,32,8,", "flash,64,8,", "linear,64,8,"}) {
            assertTrue(csv.stream().anyMatch(l -> l.startsWith(row) && l.endsWith(",")), row + "\n" + csv);
        }
        assertEquals(6, csv.size(), "stock runs only up to --stock-max\n" + csv);
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("below the"), md);
        BenchMarkdown.assertMethodInOneParagraph(md, "SameDiff: forward + backward through a graph");
    }

    @Test
    void rejectsALengthOutOfRange() throws Exception {
        CliRun run = CliRun.of("bench", "samediff", "--lengths", "8", "--out", tmp.toString());
        assertTrue(run.exitCode() != 0);
        assertTrue(run.err().contains("--lengths must be in [16, 1048576], got 8"), run.err());
    }
}
