package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.CliRun;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * A run of {@code attn4j train} that ends early still leaves what it did: its output directory, the model of its
 * last completed checkpoint interval (the one before the first step at least) and a summary saying how it ended and
 * after how many steps. Each run is a separate JVM, since JavaCPP reads its memory bound once, when ND4J loads; the
 * saved model is compared with an in-process run of exactly the steps the summary says it holds.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TrainRunEndingTest {

    /**
     * A tiny model. With 16 x 2048 tokens a step, the model and its first checkpoint need about 200 MiB and three
     * steps 450 to 500 MiB; under a bound of 400 MiB the second step failed here (DL4J sizes its workspaces after the
     * first, which needs less), under 360 MiB the first. The tests bound it at 300 MiB, half again what the start
     * needs and well below a step's need, so that the verdict does not hang on a host's exact figures; the SIGTERM
     * test covers a failure after later intervals.
     */
    private static final List<String> TINY = List.of("--d-model", "16", "--heads", "2", "--kv-heads", "2",
            "--layers", "1", "--seed", "3");

    @TempDir
    Path tmp;

    @Test
    void aBoundTooSmallForAStepEndsInOneLineAndLeavesTheLastCheckpointAndAFailedSummary() throws Exception {
        Path out = tmp.resolve("small");
        List<String> run = new ArrayList<>(List.of("--text", corpus().toString(), "--seq-len", "2048", "--batch",
                "16", "--checkpoint-every", "1"));
        run.addAll(TINY);
        List<String> args = new ArrayList<>(run);
        args.addAll(List.of("--steps", "3", "--memory-limit", "300m", "--out", out.toString()));
        Process p = start(args);
        assertTrue(p.waitFor(240, TimeUnit.SECONDS), "train with a 300 MiB bound did not end");
        String stdout = Files.readString(tmp.resolve("stdout"));
        String stderr = Files.readString(tmp.resolve("stderr"));
        assertEquals(Attn4jCli.EXIT_JOB_FAILED, p.exitValue(), stdout + stderr);
        String[] lines = stderr.strip().split("[\r\n]+");
        String last = lines[lines.length - 1];
        // JavaCPP's own figures, and which bound tripped (its cause's message)
        assertTrue(last.startsWith("train: out of memory: ") && last.contains("maxPhysicalBytes (300M)")
                && last.contains("--memory-limit"), stderr);
        assertFalse(stderr.contains("\tat ") || stderr.contains("internal error"), stderr);

        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertTrue(s.path("status").asText().startsWith("failed: out of memory: "), s.toString());
        assertTrue(s.path("status").asText().contains("maxPhysicalBytes (300M)"), s.toString());
        int done = s.path("steps_done").asInt(-1);
        assertEquals(stepLines(stdout), done, s + "\n" + stdout);
        assertTrue(done < 3, "a step needs more than 300 MiB: " + s);
        assertEquals(300L << 20, s.path("memory_limit_bytes").asLong(), s.toString());
        assertCheckpointOf(s, 1, run, out, 1e-6);
    }

    /** Two worker processes under the bound: rank 0 says how the run ended, and the launching process keeps it. */
    @Test
    void twoWorkersUnderABoundTooSmallLeaveRankZerosSummaryAndCheckpoint() throws Exception {
        Path out = tmp.resolve("workers");
        List<String> run = new ArrayList<>(List.of("--text", corpus().toString(), "--seq-len", "2048", "--batch",
                "32", "--checkpoint-every", "1"));
        run.addAll(TINY);
        List<String> args = new ArrayList<>(List.of("train", "--workers", "2", "--steps", "3", "--memory-limit",
                "300m", "--out", out.toString()));
        args.addAll(run);
        CliRun r = CliRun.of(args.toArray(new String[0]));
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode(), r.err());
        assertTrue(r.err().contains("train on 2 workers failed: "), r.err());
        JsonNode s = new ObjectMapper().readTree(out.resolve("summary.json").toFile());
        assertTrue(s.path("status").asText().startsWith("failed: out of memory: ")
                && s.path("status").asText().contains("maxPhysicalBytes (300M)"), s.toString());
        assertEquals(2, s.path("workers").asInt());
        assertTrue(s.path("steps_done").asInt() < 3, s.toString());
        // One process takes the same steps as two to float32's parity tolerance (TrainCommandTest).
        assertCheckpointOf(s, 1, run, out, 1e-4);
    }

    @Test
    void aRunStoppedFromOutsideLeavesTheModelOfItsLastIntervalAndSaysSo() throws Exception {
        Path out = tmp.resolve("stopped");
        List<String> run = new ArrayList<>(List.of("--text", corpus().toString(), "--seq-len", "32", "--batch", "2",
                "--checkpoint-every", "2"));
        run.addAll(TINY);
        List<String> args = new ArrayList<>(run);
        args.addAll(List.of("--steps", "1000000", "--out", out.toString()));
        Process p = start(args);
        Path summary = out.resolve("summary.json");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(200);
        while (checkpointStep(summary) < 2) {
            assertTrue(p.isAlive(), "train ended early: " + Files.readString(tmp.resolve("stderr")));
            assertTrue(System.nanoTime() < deadline, "no checkpoint after step 2 within 200 s");
            Thread.sleep(50);
        }
        p.destroy();                                       // SIGTERM, as a launcher or a scheduler stops a job
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "train did not stop");

        JsonNode s = new ObjectMapper().readTree(summary.toFile());
        assertTrue(s.path("status").asText().startsWith("stopped: "), s.toString());
        assertTrue(s.path("status").asText().endsWith("after step " + s.path("steps_done").asInt()), s.toString());
        assertTrue(s.path("steps_done").asInt() >= 2, s.toString());
        assertCheckpointOf(s, 2, run, out, 1e-6);
    }

    /**
     * The summary's checkpoint is one of the interval {@code every}, of the last interval completed, and
     * {@code out/model.zip} holds the model after exactly that many steps: the fresh model for step 0, else the model
     * an uninterrupted in-process run of that many steps writes, to {@code tolerance} relative.
     */
    private void assertCheckpointOf(JsonNode s, int every, List<String> run, Path out, double tolerance)
            throws Exception {
        int done = s.path("steps_done").asInt(-1);
        assertTrue(s.path("checkpoint_step").isInt(), "no checkpoint: " + s);
        int checkpoint = s.path("checkpoint_step").asInt();
        // The step after an interval may end while its checkpoint is being written: then the one before holds.
        assertTrue(checkpoint % every == 0 && checkpoint <= done && done - checkpoint <= every, s.toString());
        INDArray saved = ModelSerializer.restoreComputationGraph(out.resolve("model.zip").toFile(), false).params();
        INDArray expected;
        if (checkpoint == 0) {
            JsonNode c = s;
            expected = new GptGraph(c.path("vocab").asInt(), c.path("seq_len").asInt(), c.path("d_model").asInt(),
                    c.path("heads").asInt(), c.path("kv_heads").asInt(), c.path("layers").asInt(),
                    GptGraph.Attention.FLASH, DataType.FLOAT, 3e-3, 3).build().params();
        } else {
            Path reference = tmp.resolve("reference");
            List<String> args = new ArrayList<>(List.of("train"));
            args.addAll(run);
            args.addAll(List.of("--steps", Integer.toString(checkpoint), "--out", reference.toString()));
            CliRun r = CliRun.of(args.toArray(new String[0]));
            assertEquals(0, r.exitCode(), r.err());
            expected = ModelSerializer.restoreComputationGraph(reference.resolve("model.zip").toFile(), false)
                    .params();
        }
        assertEquals(expected.length(), saved.length());
        double difference = saved.castTo(DataType.DOUBLE).sub(expected.castTo(DataType.DOUBLE)).norm2Number()
                .doubleValue() / expected.castTo(DataType.DOUBLE).norm2Number().doubleValue();
        assertTrue(difference <= tolerance, "model.zip is not the model after " + checkpoint + " steps: relative "
                + "difference " + difference);
    }

    /** {@code attn4j train ARGS} in a JVM of its own with the launcher's flags and heap; output into files. */
    private Process start(List<String> args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString(), "-Xmx256m"));
        cmd.addAll(LocalLauncher.JVM_FLAGS);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), Attn4jCli.class.getName(), "train"));
        cmd.addAll(args);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectOutput(tmp.resolve("stdout").toFile())
                .redirectError(tmp.resolve("stderr").toFile());
        pb.environment().put("OMP_NUM_THREADS", "1");
        pb.environment().put("OPENBLAS_NUM_THREADS", "1");
        return pb.start();
    }

    /** The checkpoint step the summary names, -1 while there is none or it cannot be read. */
    private static int checkpointStep(Path summary) {
        try {
            return new ObjectMapper().readTree(summary.toFile()).path("checkpoint_step").asInt(-1);
        } catch (IOException e) {
            return -1;                                   // not written yet
        }
    }

    private static int stepLines(String stdout) {
        return (int) stdout.lines().filter(l -> l.startsWith("step ")).count();
    }

    /** 64 KB of seeded words. */
    private Path corpus() throws IOException {
        Path text = tmp.resolve("corpus.txt");
        if (!Files.exists(text)) {
            StringBuilder b = new StringBuilder();
            Random r = new Random(11);
            while (b.length() < 65536) {
                b.append("word").append(r.nextInt(50)).append(r.nextInt(8) == 0 ? ".\n" : " ");
            }
            Files.writeString(text, b.toString(), StandardCharsets.UTF_8);
        }
        return text;
    }
}
