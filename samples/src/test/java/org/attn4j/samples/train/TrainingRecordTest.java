package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/** The output directory of {@code attn4j train}: what it holds while a run goes on and after it ends, however. */
class TrainingRecordTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    private static ObjectNode settings() {
        return JSON.createObjectNode().put("task", "test").put("steps", 10);
    }

    private JsonNode summary(Path dir) throws IOException {
        return JSON.readTree(dir.resolve(TrainingRecord.SUMMARY).toFile());
    }

    @Test
    void aSummarySaysRunningFromTheStartAndTheStepTheModelHolds() throws Exception {
        Path dir = tmp.resolve("a").resolve("run");
        TrainingRecord r = new TrainingRecord(dir, settings());
        JsonNode s = summary(dir);
        assertEquals("running", s.path("status").asText());
        assertEquals(0, s.path("steps_done").asInt());
        assertTrue(s.path("checkpoint_step").isNull(), s.toString());
        assertEquals("test", s.path("task").asText());

        r.checkpoint(tinyModel(), 0);
        r.stepDone(3, JSON.createObjectNode().put("final_loss", 1.5));
        r.failed(new RuntimeException("wrapped", new OutOfMemoryError("physicalBytes (9M) > maxPhysicalBytes (8M)")));
        s = summary(dir);
        assertEquals("failed: out of memory: physicalBytes (9M) > maxPhysicalBytes (8M)", s.path("status").asText());
        assertEquals(3, s.path("steps_done").asInt());
        assertEquals(0, s.path("checkpoint_step").asInt());
        assertEquals(1.5, s.path("final_loss").asDouble());
        assertTrue(Files.isRegularFile(dir.resolve(TrainingRecord.MODEL)));
    }

    @Test
    void nothingIsWrittenAfterTheRunHasEnded() throws Exception {
        TrainingRecord r = new TrainingRecord(tmp, settings());
        r.completed(10, JSON.createObjectNode().put("accuracy", 0.5));
        r.checkpoint(tinyModel(), 10);
        r.failed(new IllegalStateException("late"));
        JsonNode s = summary(tmp);
        assertEquals("completed", s.path("status").asText());
        assertTrue(s.path("checkpoint_step").isNull(), s.toString());
        assertTrue(Files.notExists(tmp.resolve(TrainingRecord.MODEL)));
    }

    @Test
    void aModelThatCannotBeWrittenLeavesThePreviousOneAndItsStep() throws Exception {
        TrainingRecord r = new TrainingRecord(tmp, settings());
        ComputationGraph net = tinyModel();
        r.checkpoint(net, 0);
        byte[] before = Files.readAllBytes(tmp.resolve(TrainingRecord.MODEL));
        net.params().addi(1);
        // the next one fails half-way, as on a full disk
        assertThrows(IOException.class, () -> r.checkpoint(TrainingRecord.MODEL, to -> {
            Files.write(to, new byte[] {1, 2, 3});
            throw new IOException("No space left on device");
        }, 5));
        assertArrayEquals(before, Files.readAllBytes(tmp.resolve(TrainingRecord.MODEL)));
        assertTrue(Files.notExists(tmp.resolve(TrainingRecord.MODEL + ".tmp")), "the half-written file is gone");
        assertEquals(0, summary(tmp).path("checkpoint_step").asInt());
        ComputationGraph saved = ModelSerializer.restoreComputationGraph(tmp.resolve(TrainingRecord.MODEL).toFile(),
                false);
        assertEquals(net.params().sub(1), saved.params());
    }

    @Test
    void aModelDirectoryIsReplacedWholeAndOneThatFailsLeavesThePrevious() throws Exception {
        TrainingRecord r = new TrainingRecord(tmp, settings());
        for (int step : new int[] {0, 3}) {
            r.checkpoint("model", to -> {
                Files.createDirectories(to);
                Files.writeString(to.resolve("weights"), "step " + step);
            }, step);
        }
        assertEquals("step 3", Files.readString(tmp.resolve("model/weights")));
        assertThrows(IOException.class, () -> r.checkpoint("model", to -> {
            Files.createDirectories(to);
            Files.writeString(to.resolve("weights"), "half");
            throw new IOException("No space left on device");
        }, 6));
        assertEquals("step 3", Files.readString(tmp.resolve("model/weights")));
        assertEquals(3, summary(tmp).path("checkpoint_step").asInt());
        assertTrue(Files.notExists(tmp.resolve("model.tmp")) && Files.notExists(tmp.resolve("model.old")));
    }

    @Test
    void aLauncherMarksARunItsRankZeroDidNotEndAndLeavesOneItDid() throws Exception {
        Path running = tmp.resolve("running");
        new TrainingRecord(running, settings()).stepDone(4, null);
        TrainingRecord.failedIfUnfinished(running, settings(), "train on 2 workers failed: rank 1 exited with 137");
        assertEquals("failed: train on 2 workers failed: rank 1 exited with 137",
                summary(running).path("status").asText());

        Path missing = tmp.resolve("missing");
        TrainingRecord.failedIfUnfinished(missing, settings(), "rank 0 never started");
        JsonNode m = summary(missing);
        assertEquals("failed: rank 0 never started", m.path("status").asText());
        assertEquals(0, m.path("steps_done").asInt());
        assertEquals("test", m.path("task").asText());

        Path failed = tmp.resolve("failed");
        new TrainingRecord(failed, settings()).failed(new OutOfMemoryError("bound"));
        TrainingRecord.failedIfUnfinished(failed, settings(), "train on 2 workers failed");
        assertEquals("failed: out of memory: bound", summary(failed).path("status").asText());
    }

    private static ComputationGraph tinyModel() {
        return new GptGraph(16, 8, 8, 2, 2, 1, GptGraph.Attention.FLASH, DataType.FLOAT, 1e-3, 1).build();
    }
}
