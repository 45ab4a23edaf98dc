package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code attn4j bench llama} on the tiny Llama's shape ({@code ../shared/fixtures}): one CSV row per prompt length
 * with a positive rate and peak memory, the anchor's row read from what its {@code run.sh} prints (a stand-in
 * script here) into its own CSV and the markdown table beside attn4j's, bad options in one line.
 */
class LlamaBenchCommandTest {

    /** The line before the anchor's row. */
    private static final String HEADER = "echo 'mode,n,batch,threads,tokens_per_s,peak_rss_mb,torch,transformers'\n";

    @TempDir
    Path tmp;

    /** The tiny Llama's config.json from ../shared/fixtures; the test is skipped without it. */
    private static Path tinyLlama() {
        Path config = Path.of("..", "..", "shared", "fixtures", "hf-tiny", "llama-gqa-f32", "model", "config.json")
                .toAbsolutePath().normalize();
        Assumptions.assumeTrue(Files.isRegularFile(config), "no fixture at " + config);
        return config;
    }

    /** A directory whose run.sh, standing in for the anchor, is {@code script}. */
    private Path standIn(String script) throws IOException {
        Path anchor = Files.createDirectories(tmp.resolve("anchor"));
        Files.writeString(anchor.resolve("run.sh"), script);
        return anchor;
    }

    @Test
    void writesARowPerLengthAndTheAnchorsBesideIt() throws Exception {
        Path config = tinyLlama();
        Path anchor = standIn("echo 'loading'\n" + HEADER + "echo \"$1,$5,1,2,123.4,567,2.9.0,5.18.0\"\n");
        CliRun r = CliRun.of("bench", "llama", "--config", config.toString(), "--n", "40,72", "--new-tokens", "3",
                "--compare-hf", anchor.toString(), "--out", tmp.resolve("out").toString());
        assertEquals(0, r.exitCode(), r.err() + r.out());
        List<String> csv = Files.readAllLines(tmp.resolve("out").resolve("bench-llama.csv"));
        assertEquals("mode,n,batch,tokens_per_s,peak_rss_mb", csv.get(0));
        assertEquals(3, csv.size(), String.join("\n", csv));
        for (int i = 1; i < 3; i++) {
            String[] f = csv.get(i).split(",");
            assertEquals(List.of("decode", i == 1 ? "40" : "72", "1"), List.of(f[0], f[1], f[2]));
            assertTrue(Double.parseDouble(f[3]) > 0 && Double.parseDouble(f[4]) > 50, csv.get(i));
        }
        assertEquals(List.of("mode,n,batch,tokens_per_s,peak_rss_mb,torch,transformers",
                "decode,40,1,123.4,567,2.9.0,5.18.0", "decode,72,1,123.4,567,2.9.0,5.18.0"),
                Files.readAllLines(tmp.resolve("out").resolve("bench-llama-hf.csv")));
        String md = Files.readString(tmp.resolve("out").resolve("benchmarks.md"));
        assertTrue(md.contains("| decode | 40 | " + csv.get(1).split(",")[3] + " | 123.4 |"), md);
        BenchMarkdown.assertMethodInOneParagraph(md, "Llama-family models beside Hugging Face transformers");

        CliRun bad = CliRun.of("bench", "llama", "--config", config.toString(), "--mode", "sample", "--out",
                tmp.resolve("bad").toString());
        assertEquals(1, bad.exitCode());
        assertEquals(1, bad.errLines().length, bad.err());
        assertTrue(bad.err().contains("--mode must be decode or train, got sample"), bad.err());
        CliRun batched = CliRun.of("bench", "llama", "--config", config.toString(), "--batch", "2", "--out",
                tmp.resolve("bad").toString());
        assertEquals(1, batched.exitCode());
        assertTrue(batched.err().contains("--batch: decoding runs one sequence, got 2"), batched.err());
    }

    /**
     * {@code --mode train}: whole fine-tuning steps of the tiny Llama on batches of two sequences, a row per length
     * with a positive rate, and the anchor asked for the same steps and batch.
     */
    @Test
    void trainModeTimesWholeStepsAndAsksTheAnchorForTheSame() throws Exception {
        Path config = tinyLlama();
        // The stand-in prints its arguments' steps and batch where the anchor prints its rate and batch.
        Path anchor = standIn("while [ $# -gt 0 ]; do case $1 in --steps) s=$2;; --batch) b=$2;; --n) n=$2;; "
                + "esac; shift; done\n" + HEADER + "echo \"train,$n,$b,2,$s,567,2.9.0,5.18.0\"\n");
        CliRun r = CliRun.of("bench", "llama", "--config", config.toString(), "--mode", "train", "--n", "24",
                "--steps", "2", "--batch", "2", "--compare-hf", anchor.toString(), "--out", tmp.resolve("out")
                        .toString());
        assertEquals(0, r.exitCode(), r.err() + r.out());
        List<String> csv = Files.readAllLines(tmp.resolve("out").resolve("bench-llama-train.csv"));
        assertEquals(2, csv.size(), String.join("\n", csv));
        String[] f = csv.get(1).split(",");
        assertEquals(List.of("train", "24", "2"), List.of(f[0], f[1], f[2]));
        assertTrue(Double.parseDouble(f[3]) > 0 && Double.parseDouble(f[4]) > 50, csv.get(1));
        assertEquals(List.of("mode,n,batch,tokens_per_s,peak_rss_mb,torch,transformers",
                "train,24,2,2,567,2.9.0,5.18.0"),
                Files.readAllLines(tmp.resolve("out").resolve("bench-llama-train-hf.csv")));
        String md = Files.readString(tmp.resolve("out").resolve("benchmarks.md"));
        assertTrue(md.contains("| train | 24 | " + f[3] + " | 2 |") && md.contains("Train: tokens per second of 2 "
                + "whole fine-tuning steps"), md);
        BenchMarkdown.assertMethodInOneParagraph(md, "Llama-family models beside Hugging Face transformers: "
                + "fine-tuning");

        // one timed step, no untimed one, with activation checkpointing: a row, and the method says so
        CliRun once = CliRun.of("bench", "llama", "--config", config.toString(), "--mode", "train", "--n", "24",
                "--steps", "1", "--untimed-steps", "0", "--activation-checkpointing", "--out",
                tmp.resolve("once").toString());
        assertEquals(0, once.exitCode(), once.err() + once.out());
        assertEquals(2, Files.readAllLines(tmp.resolve("once").resolve("bench-llama-train.csv")).size());
        String onceMd = Files.readString(tmp.resolve("once").resolve("benchmarks.md"));
        assertTrue(onceMd.contains("0 steps before them are not timed") && onceMd.contains("activation "
                + "checkpointing"), onceMd);
        CliRun unlike = CliRun.of("bench", "llama", "--config", config.toString(), "--mode", "train",
                "--untimed-steps", "0", "--compare-hf", anchor.toString(), "--out", tmp.resolve("bad").toString());
        assertEquals(1, unlike.exitCode());
        assertTrue(unlike.err().contains("--compare-hf: the anchor times its steps after one untimed step, got "
                + "--untimed-steps 0"), unlike.err());
        CliRun decoding = CliRun.of("bench", "llama", "--config", config.toString(), "--activation-checkpointing",
                "--out", tmp.resolve("bad").toString());
        assertEquals(1, decoding.exitCode());
        assertTrue(decoding.err().contains("--activation-checkpointing is for --mode train"), decoding.err());
    }
}
