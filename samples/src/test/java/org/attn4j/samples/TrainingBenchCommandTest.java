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

/** A tiny {@code attn4j bench training} run: a row per attention kind and N, the files written; no timing. */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class TrainingBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesARowPerKindAndLength() throws Exception {
        CliRun run = CliRun.of("bench", "training", "--min-n", "16", "--max-n", "32", "--tokens", "64", "--steps",
                "1", "--heap", "1g", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-training.csv"));
        assertEquals("attention,n,batch,tokens_per_second,peak_bytes,failure", csv.get(0));
        for (String kind : new String[] {"flash", "linear", "stock"}) {
            assertTrue(csv.stream().anyMatch(l -> l.startsWith(kind + ",16,4,")), kind + "\n" + csv);
        }
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("flash,32,2,") && l.endsWith(",")), String.join("\n",
                csv));
        assertTrue(Files.size(tmp.resolve("bench-training.png")) > 0);
        BenchMarkdown.assertMethodInOneParagraph(Files.readString(tmp.resolve("benchmarks.md")),
                "Training: flash vs linear vs DL4J's stock attention");
    }
}
