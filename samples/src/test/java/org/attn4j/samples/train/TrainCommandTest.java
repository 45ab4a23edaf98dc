package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.CliRun;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * {@code attn4j train}: two worker processes print the losses of one process (to the trainer's parity
 * tolerance) and save its model also at ZeRO stage 3, a run writes its curve, summary and model, and bad flags get
 * one clear line.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TrainCommandTest {

    @TempDir
    Path tmp;

    @Test
    void twoWorkersPrintTheLossesOfOneProcess() throws Exception {
        List<Double> one = losses(CliRun.of("train", "--steps", "5", "--seed", "1", "--out", tmp.resolve("one")
                .toString()));
        List<Double> two = losses(CliRun.of("train", "--workers", "2", "--strategy", "ring", "--steps", "5",
                "--seed", "1", "--out", tmp.resolve("two").toString()));
        assertEquals(5, one.size());
        assertEquals(one.size(), two.size());
        for (int i = 0; i < one.size(); i++) {
            // float32 training: the trainer's parity tolerance
            assertEquals(one.get(i), two.get(i), 1e-4 * Math.abs(one.get(i)), "step " + i + ": " + one + " vs " + two);
        }
        assertTrue(Files.size(tmp.resolve("one").resolve("loss.png")) > 0);
        assertTrue(Files.readString(tmp.resolve("one").resolve("summary.json")).contains("\"accuracy\""));
        assertTrue(Files.exists(tmp.resolve("one").resolve("model.zip")));
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "--strategy torus --workers 2|unknown sequence-parallel algorithm 'torus'",
        "--strategy spiral|unknown sequence-parallel algorithm 'spiral'",
        "--workers 0|--workers must be in [1, 16], got 0",
        "--workers 3 --strategy zigzag --seq-len 64|N = 64 must be a positive multiple of 6",
        "--text /no/such/file.txt|--text /no/such/file.txt: no such file",
        "--attention quantum|--attention must be flash, linear or stock",
        "--resume|--resume needs --checkpoint-dir",
        "--pad|--pad needs --text FILE",
        "--pack --seq-len 12|--pack --task passkey needs --seq-len >= 19",
        "--doc-separator ###|--doc-separator needs --text FILE"})
    void refusesBadFlagsWithOneLine(String flags, String message) {
        List<String> args = new ArrayList<>(List.of("train"));
        args.addAll(List.of(flags.split(" ")));
        args.addAll(List.of("--out", tmp.toString()));
        CliRun r = CliRun.of(args.toArray(new String[0]));
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode(), r.err());
        assertTrue(r.err().contains(message), r.err());
        assertEquals(1, r.err().strip().lines().count(), "one line: " + r.err());
    }

    /**
     * {@code --text FILE --pack} and {@code --pad}: the same documents packed or one per padded sequence; the
     * summary reports the text tokens per second of each, and packing leaves no padding. Two worker processes
     * print the losses of one process on packed text.
     */
    @Test
    void packedTextTrainsOnOneAndTwoWorkersAndReportsTextTokensPerSecond() throws Exception {
        Path text = tmp.resolve("docs.txt");
        StringBuilder b = new StringBuilder();
        java.util.Random r = new java.util.Random(5);
        for (int d = 0; d < 200; d++) {
            for (int w = 0; w < 2 + r.nextInt(12); w++) {
                b.append(w == 0 ? "" : " ").append("word").append(r.nextInt(30));
            }
            b.append(".\n\n");
        }
        Files.writeString(text, b.toString());
        CliRun packed = CliRun.of("train", "--text", text.toString(), "--pack", "--seq-len", "64", "--steps", "4",
                "--out", tmp.resolve("packed").toString());
        CliRun padded = CliRun.of("train", "--text", text.toString(), "--pad", "--seq-len", "64", "--steps", "4",
                "--out", tmp.resolve("padded").toString());
        assertEquals(0, packed.exitCode(), packed.err());
        assertEquals(0, padded.exitCode(), padded.err());
        var json = new org.nd4j.shade.jackson.databind.ObjectMapper();
        var p = json.readTree(tmp.resolve("packed").resolve("summary.json").toFile());
        var q = json.readTree(tmp.resolve("padded").resolve("summary.json").toFile());
        assertEquals(p.get("tokens_per_second").asDouble(), p.get("document_tokens_per_second").asDouble(), 1e-9,
                "packed sequences hold no padding");
        assertTrue(q.get("document_tokens_per_second").asDouble() < 0.8 * q.get("tokens_per_second").asDouble(),
                "documents of at most about 120 bytes leave padding in sequences of 64: " + q);
        assertTrue(p.get("task").asText().contains("packed") && q.get("task").asText().contains("padded"));

        List<Double> one = losses(packed);
        List<Double> two = losses(CliRun.of("train", "--text", text.toString(), "--pack", "--seq-len", "64",
                "--steps", "4", "--workers", "2", "--strategy", "ring", "--out", tmp.resolve("two").toString()));
        assertEquals(one.size(), two.size());
        for (int i = 0; i < one.size(); i++) {
            assertEquals(one.get(i), two.get(i), 1e-4 * Math.abs(one.get(i)), "step " + i + ": " + one + " vs " + two);
        }
    }

    @Test
    void atZeroStage3TheSavedModelHoldsTheTrainedParametersOfOneProcess() throws Exception {
        CliRun one = CliRun.of("train", "--steps", "3", "--seed", "1", "--seq-len", "16", "--out",
                tmp.resolve("one").toString());
        assertEquals(0, one.exitCode(), one.err());
        CliRun two = CliRun.of("train", "--workers", "2", "--strategy", "ring", "--zero", "3", "--steps", "3",
                "--seed", "1", "--seq-len", "16", "--out", tmp.resolve("two").toString());
        assertEquals(0, two.exitCode(), two.err());
        INDArray expected = ComputationGraph.load(tmp.resolve("one").resolve("model.zip").toFile(), false).params();
        INDArray saved = ComputationGraph.load(tmp.resolve("two").resolve("model.zip").toFile(), false).params();
        // float32 Adam over 3 steps: a few elements may differ by an update; a released page would read 0
        double off = saved.sub(expected).norm2Number().doubleValue() / expected.norm2Number().doubleValue();
        assertTrue(off <= 1e-3, "the 2-worker stage-3 model's parameters are off by " + off + " (norm-wise)");
    }

    @Test
    void refusesToResumeACheckpointOfAnotherModelWithOneLine() throws Exception {
        Path ck = tmp.resolve("ck");
        CliRun first = CliRun.of("train", "--workers", "2", "--steps", "2", "--checkpoint-dir", ck.toString(),
                "--checkpoint-every", "1", "--seq-len", "16", "--out", tmp.resolve("a").toString());
        assertEquals(0, first.exitCode(), first.err());
        CliRun other = CliRun.of("train", "--workers", "2", "--steps", "4", "--checkpoint-dir", ck.toString(),
                "--resume", "--seq-len", "16", "--d-model", "32", "--out", tmp.resolve("b").toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, other.exitCode(), other.err());
        assertTrue(other.err().contains("is of another model"), other.err());
        assertEquals(1, other.err().strip().lines().count(), "one line: " + other.err());
    }

    /** What the user sees when the newest checkpoint is damaged: which one was skipped and why, which one is used. */
    @Test
    void resumeSaysWhichCheckpointItSkippedAndWhyAndWhichItResumesFrom() throws Exception {
        Path ck = tmp.resolve("ck");
        CliRun first = CliRun.of("train", "--workers", "2", "--steps", "2", "--checkpoint-dir", ck.toString(),
                "--checkpoint-every", "1", "--seq-len", "16", "--out", tmp.resolve("a").toString());
        assertEquals(0, first.exitCode(), first.err());
        Files.write(ck.resolve("manifest-000002.json"), new byte[0]);
        CliRun resumed = CliRun.of("train", "--workers", "2", "--steps", "3", "--checkpoint-dir", ck.toString(),
                "--checkpoint-every", "1", "--resume", "--seq-len", "16", "--out", tmp.resolve("b").toString());
        assertEquals(0, resumed.exitCode(), resumed.err());
        List<String> err = resumed.err().lines().toList();
        String skipped = "checkpoint 2 (" + ck.resolve("manifest-000002.json") + ") skipped: its manifest is empty; "
                + "moved to " + ck.resolve("skipped-000002");
        assertEquals(1, err.stream().filter(l -> l.endsWith(skipped)).count(), resumed.err());
        assertEquals(1, err.stream().filter(l -> l.endsWith("resuming from checkpoint 1 ("
                + ck.resolve("manifest-000001.json") + ") instead")).count(), resumed.err());
        assertEquals(List.of("step 1", "step 2"), resumed.out().lines().filter(l -> l.startsWith("step "))
                .map(l -> l.substring(0, l.indexOf(" loss "))).toList(), resumed.out());
    }

    @Test
    void helpListsEveryOptionWithItsDefault() {
        CliRun r = CliRun.of("train", "--help");
        assertEquals(0, r.exitCode());
        for (String option : new String[] {"--task", "--text", "--seq-len", "--layers", "--d-model", "--heads",
            "--kv-heads", "--attention", "--batch", "--steps", "--lr", "--seed", "--workers", "--strategy", "--zero",
            "--checkpoint-dir", "--resume", "--out"}) {
            assertTrue(r.out().contains(option), option + " missing from\n" + r.out());
        }
        String help = r.out().replaceAll("\\s+", " ");
        assertTrue(help.contains("(default: passkey)") && help.contains("(default: 800)"), r.out());
    }

    private static List<Double> losses(CliRun r) {
        assertEquals(0, r.exitCode(), r.err() + r.out());
        List<Double> out = new ArrayList<>();
        for (String line : r.out().lines().toList()) {
            if (line.startsWith("step ")) {
                out.add(Double.parseDouble(line.substring(line.indexOf(" loss ") + 6)));
            }
        }
        return out;
    }
}
