package org.attn4j.samples.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.CliRun;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * {@code attn4j checkpoint export}: the sharded checkpoint of a two-worker ZeRO stage 3 run becomes a model zip
 * that plain DL4J loads with the outputs of the model the run saved at the same step; bad input is one line.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CheckpointCommandTest {

    @TempDir
    Path tmp;

    @Test
    void exportsAStage3CheckpointThatPlainDl4jLoadsWithTheTrainedOutputs() throws Exception {
        Path ck = tmp.resolve("ck");
        Path run = tmp.resolve("run");
        CliRun train = CliRun.of("train", "--workers", "2", "--zero", "3", "--steps", "2", "--checkpoint-dir",
                ck.toString(), "--checkpoint-every", "2", "--seq-len", "16", "--out", run.toString());
        assertEquals(0, train.exitCode(), train.err());
        Path zip = tmp.resolve("exported.zip");
        CliRun export = CliRun.of("checkpoint", "export", "--dir", ck.toString(), "--out", zip.toString());
        assertEquals(0, export.exitCode(), export.err());
        assertTrue(export.out().contains("step 2"), export.out());

        ComputationGraph exported = ModelSerializer.restoreComputationGraph(zip.toFile(), false);
        ComputationGraph trained = ModelSerializer.restoreComputationGraph(run.resolve("model.zip").toFile(), false);
        Nd4j.getRandom().setSeed(5);
        INDArray tokens = Nd4j.randomBernoulli(0.5, 2, 1, 16).castTo(DataType.FLOAT).muli(3);
        assertEquals(trained.outputSingle(tokens), exported.outputSingle(tokens));
    }

    @Test
    void aDirectoryWithoutACheckpointIsOneLine() throws Exception {
        Files.createDirectories(tmp.resolve("empty"));
        CliRun r = CliRun.of("checkpoint", "export", "--dir", tmp.resolve("empty").toString(), "--out",
                tmp.resolve("m.zip").toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode(), r.err());
        assertTrue(r.err().contains("no complete checkpoint"), r.err());
        assertEquals(1, r.err().strip().lines().count(), "one line: " + r.err());
        CliRun missing = CliRun.of("checkpoint", "export", "--dir", tmp.resolve("nowhere").toString(), "--out",
                tmp.resolve("m.zip").toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, missing.exitCode(), missing.err());
        assertTrue(missing.err().contains("is not a directory"), missing.err());
    }
}
