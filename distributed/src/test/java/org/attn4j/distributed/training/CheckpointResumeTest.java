package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.testing.StandardError;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Sharded checkpoints: a run resumed from step 10 of a checkpointed run takes exactly the steps the uninterrupted
 * run took; only complete checkpoints count, and one passed over is logged and kept aside; a checkpoint of another
 * run, model or world size is refused before any step.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CheckpointResumeTest {

    private static final int STEPS = 20;
    private static final ParallelStrategy STRATEGY = ParallelStrategy.sequence("ring", 2)
            .withDataParallel(2).withZero(ZeroStage.GRADIENTS);

    @TempDir
    Path dir;

    private List<DataSet> batches;

    @BeforeEach
    void data() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, 4, 16, 7);
    }

    @Test
    void resumingFromACheckpointRepeatsTheUninterruptedRunExactly() throws Exception {
        double[] whole = train(dir.resolve("whole"), STEPS, false, STRATEGY, "run").get(0);

        Path ck = dir.resolve("interrupted");
        train(ck, 12, false, STRATEGY, "run");                  // checkpoints at 5 and 10; steps 11, 12 are lost
        assertTrue(Files.exists(ck.resolve("manifest-000010.json")));
        List<double[]> resumed = train(ck, STEPS, true, STRATEGY, "run");
        for (double[] curve : resumed) {
            for (int i = 10; i < STEPS; i++) {
                assertEquals(whole[i], curve[i], 0.0, "step " + i + " after resuming from step 10");
            }
        }
    }

    @Test
    void onlyCompleteCheckpointsCountAndNothingCompleteIsOverwritten() throws Exception {
        Path ck = dir.resolve("ck");
        train(ck, 10, false, STRATEGY, "run");
        byte[] manifest5 = Files.readAllBytes(ck.resolve("manifest-000005.json"));
        // A damaged shard of step 10 (as a worker killed mid-write would leave it, had it been renamed).
        Path shard = ck.resolve("step-000010").resolve("rank-1.shard");
        Files.write(shard, new byte[] {1, 2, 3});
        CheckpointStore.Checkpoint c = new CheckpointStore(ck).newestComplete().orElseThrow();
        assertEquals(5, c.step(), "the damaged step-10 checkpoint must be passed over");
        List<double[]> resumed = train(ck, 6, true, STRATEGY, "run");
        assertEquals(4, resumed.size());
        assertArrayEquals(manifest5, Files.readAllBytes(ck.resolve("manifest-000005.json")));
    }

    @Test
    void resumingPastADamagedManifestSaysSoKeepsItAndRepeatsTheRunFromTheCheckpointBefore() throws Exception {
        double[] whole = train(dir.resolve("whole"), STEPS, false, STRATEGY, "run").get(0);
        Path ck = dir.resolve("damaged");
        train(ck, 12, false, STRATEGY, "run");                  // checkpoints at 5 and 10
        Path manifest10 = ck.resolve("manifest-000010.json");
        byte[] m = Files.readAllBytes(manifest10);
        Files.write(manifest10, Arrays.copyOf(m, m.length / 2));   // as a disk that filled up would leave it
        byte[] damaged = Files.readAllBytes(manifest10);
        byte[] shard = Files.readAllBytes(ck.resolve("step-000010").resolve("rank-3.shard"));

        List<double[]> resumed = new ArrayList<>();
        List<String> log = StandardError.linesOf(() -> resumed.addAll(train(ck, STEPS, true, STRATEGY, "run")));
        for (double[] curve : resumed) {
            for (int i = 5; i < STEPS; i++) {
                assertEquals(whole[i], curve[i], 0.0, "step " + i + " after resuming from step 5");
            }
        }
        Path aside = ck.resolve("skipped-000010");
        String all = String.join("\n", log);
        assertEquals(1, log.stream().filter(l -> l.contains("CheckpointStore - checkpoint 10 (" + manifest10
                + ") skipped: its manifest is not valid JSON (") && l.endsWith("; moved to " + aside)).count(), all);
        assertEquals(1, log.stream().filter(l -> l.endsWith("CheckpointStore - resuming from checkpoint 5 ("
                + ck.resolve("manifest-000005.json") + ") instead")).count(), all);
        assertArrayEquals(damaged, Files.readAllBytes(aside.resolve("manifest-000010.json")));
        assertArrayEquals(shard, Files.readAllBytes(aside.resolve("step-000010").resolve("rank-3.shard")));
        CheckpointStore.Scan after = new CheckpointStore(ck).scan();
        assertEquals(20, after.newest().orElseThrow().step());
        assertTrue(after.skipped().isEmpty(), after.skipped().toString());
        assertEquals(10, new org.nd4j.shade.jackson.databind.ObjectMapper().readTree(manifest10.toFile())
                .get("step").asInt(), "the resumed run's own checkpoint 10");
    }

    @Test
    void refusesACheckpointOfAnotherRunModelOrWorldSizeBeforeAnyStep() throws Exception {
        Path ck = dir.resolve("ck");
        train(ck, 5, false, STRATEGY, "run");
        assertRefused(() -> train(ck, 6, true, STRATEGY, "other"), "belongs to run 'run'");
        assertRefused(() -> TrainingFixtures.onWorkers(4, t -> DistributedTrainer.builder(
                TrainingFixtures.gpt(DataType.DOUBLE, false, 1, 3), t).strategy(STRATEGY).checkpoints(ck, 5)
                .run("run").resume(true).build()), "of another model");
        assertRefused(() -> train(ck, 6, true, ParallelStrategy.sequence("ring", 2), "run"),
                "written by 4 workers");
        try (Stream<Path> files = Files.list(ck)) {
            assertEquals(2, files.count(), "a refused run writes nothing: still step-000005 and its manifest");
        }
    }

    @Test
    void refusesBatchesThatDoNotSplitBeforeAnyCommunication() throws Exception {
        List<Throwable> errors = TrainingFixtures.onWorkers(4, t -> {
            DistributedTrainer trainer = DistributedTrainer.builder(TrainingFixtures.gpt(DataType.DOUBLE, false, 2,
                    3), t).strategy(ParallelStrategy.sequence("ring", 2).withDataParallel(2)).build();
            Throwable oddBatch = assertThrows(IllegalArgumentException.class,
                    () -> trainer.fit(TrainingFixtures.batches(DataType.DOUBLE, 1, 3, 16, 1).get(0)));
            Throwable oddLength = assertThrows(IllegalArgumentException.class,
                    () -> trainer.fit(TrainingFixtures.batches(DataType.DOUBLE, 1, 4, 18, 1).get(0)));
            assertEquals(0, t.traffic().total(), "refused before sending anything");
            return oddBatch.getMessage().contains("batch of 3 examples does not split over 2")
                    && oddLength.getMessage().contains("sequence length 18 does not split into 4") ? null
                    : new AssertionError(oddBatch.getMessage() + " / " + oddLength.getMessage());
        });
        for (Throwable e : errors) {
            if (e != null) {
                throw new AssertionError(e);
            }
        }
    }

    /** Trains up to step {@code until} (checkpoints every 5), resuming if asked; the curves by rank. */
    private List<double[]> train(Path ck, int until, boolean resume, ParallelStrategy s, String run)
            throws Exception {
        return TrainingFixtures.onWorkers(s.worldSize(), t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, 2, 3);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(s).checkpoints(ck, 5).run(run)
                    .resume(resume).build();
            double[] curve = new double[STEPS];
            int start = Math.max(0, trainer.resumedFromStep());
            assertEquals(start, (int) trainer.batchesDone());
            for (int i = start; i < until; i++) {
                curve[i] = trainer.fit(batches.get(i));
            }
            return curve;
        });
    }

    private static void assertRefused(org.junit.jupiter.api.function.Executable run, String message) {
        ExecutionException e = assertThrows(ExecutionException.class, run);
        IllegalArgumentException cause = assertInstanceOf(IllegalArgumentException.class, e.getCause(),
                String.valueOf(e.getCause()));
        assertTrue(cause.getMessage().contains(message), cause.getMessage());
        assertFalse(cause.getMessage().isBlank());
    }
}
