package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Training in real worker processes over Aeron reproduces the single-process curve (a representative subset of
 * the in-JVM matrix). Recovery: a worker SIGKILLed in the middle of writing its checkpoint shard
 * leaves the previous checkpoint complete and loadable, every other worker exits non-zero by itself within the
 * transport timeout, and restarting from the checkpoint gives exactly the losses the killed run had before it died.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TrainingProcessTest {

    @TempDir
    Path dir;

    @Test
    void aWorkerKilledMidCheckpointLosesNothingAndTheRestartContinuesExactly() throws Exception {
        Path ck = dir.resolve("killed");
        Run killed = launch(ck, 12, false, "10:2");
        LaunchResult r = killed.result();
        assertFalse(r.succeeded(), killed.output());
        assertEquals(137, r.exitCodes()[2], "rank 2 was SIGKILLed\n" + killed.output());
        for (int rank : new int[] {0, 1, 3}) {
            assertNotEquals(0, r.exitCodes()[rank], "rank " + rank + " must fail\n" + killed.output());
            assertFalse(r.stopped()[rank], "rank " + rank + " must exit by itself, not be stopped by the launcher\n"
                    + killed.output());
        }
        assertTrue(killed.output().contains("rank 2"), "the survivors name the dead rank\n" + killed.output());
        // the killed run printed steps 0-8 uninterrupted; it died writing checkpoint 10 before printing step 9's loss
        assertEquals(9, killed.losses().size(), killed.output());
        Path half = ck.resolve("step-000010").resolve("rank-2.shard.tmp");
        long whole5 = Files.size(ck.resolve("step-000005").resolve("rank-2.shard"));
        assertTrue(Files.isRegularFile(half) && Files.size(half) > 0 && Files.size(half) < whole5,
                "rank 2 died half-way through its shard: " + (Files.exists(half) ? Files.size(half) : -1)
                        + " bytes written, a whole one has about " + whole5);
        assertFalse(Files.exists(ck.resolve("step-000010").resolve("rank-2.shard")));
        CheckpointStore.Checkpoint last = new CheckpointStore(ck).newestComplete().orElseThrow();
        assertEquals(5, last.step(), "step 5 stays the newest complete checkpoint");
        assertFalse(Files.exists(ck.resolve("manifest-000010.json")));

        Run resumed = launch(ck, 12, true, null);
        assertEquals(0, resumed.result().exitCode(), resumed.output());
        assertEquals(7, resumed.losses().size(), "steps 5 to 11 after resuming\n" + resumed.output());
        for (int step = 5; step < 9; step++) {
            assertEquals(killed.losses().get(step), resumed.losses().get(step),
                    "loss at step " + step + ": the resumed run against the run before the kill");
        }
    }

    @ParameterizedTest(name = "{0} DP={1} SP={2} {3}")
    @CsvSource({"wallfacer, 1, 4, PARAMETERS", "lasp, 1, 4, OPTIMIZER_STATE", "attention2d, 2, 2, NONE"})
    void workerProcessesReproduceTheSingleProcessCurve(String name, int dp, int sp, ZeroStage zero)
            throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        long seed = 42 + name.hashCode();
        int kvHeads = name.equals("ulysses") ? TrainingFixtures.HEADS : TrainingFixtures.HEADS / 2;
        double[] expected = DistributedTrainerParityTest.singleProcess(DataType.DOUBLE, name.equals("lasp"), kvHeads,
                seed, TrainingFixtures.batches(DataType.DOUBLE, 12, 4, 16, seed));
        Run run = launch(dir.resolve(name), 12, false, null, List.of(name, Integer.toString(dp),
                Integer.toString(sp), zero.name()));
        assertEquals(0, run.result().exitCode(), run.output());
        assertEquals(12, run.losses().size(), run.output());
        for (int i = 0; i < 12; i++) {
            double got = Double.parseDouble(run.losses().get(i));
            assertEquals(expected[i], got, 1e-6 * Math.abs(expected[i]), name + " step " + i);
        }
    }

    private record Run(LaunchResult result, Map<Integer, String> losses, String output) {
    }

    private static Run launch(Path ck, int steps, boolean resume, String kill) throws Exception {
        return launch(ck, steps, resume, kill, List.of());
    }

    /**
     * Four workers; rank 0's losses by step, exactly as printed. With {@code kill} ("step:rank"), that rank dies
     * half-way through writing its shard of that checkpoint ({@link KilledMidShardWorker}).
     */
    private static Run launch(Path ck, int steps, boolean resume, String kill, List<String> strategy)
            throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        List<String> args = new java.util.ArrayList<>(List.of(ck.toString(), Integer.toString(steps),
                resume ? "resume" : "fresh"));
        args.addAll(strategy);
        if (kill != null) {
            args.add(0, kill);
        }
        Class<?> worker = kill == null ? TrainingWorker.class : KilledMidShardWorker.class;
        LocalLauncher.Builder b = LocalLauncher.builder(4, worker.getName())
                .args(args)
                .heap("768m").timeout(Duration.ofSeconds(200)).stopGrace(Duration.ofSeconds(30))
                .env("ATTN4J_TIMEOUT_MS", "10000").output(out::add, out::add);
        LaunchResult r = b.build().run();
        Map<Integer, String> losses = new TreeMap<>();
        for (String line : out) {
            if (line.startsWith("[rank 0] LOSS ")) {
                String[] f = line.substring("[rank 0] LOSS ".length()).split(" ");
                losses.put(Integer.parseInt(f[0]), f[1]);
            }
        }
        return new Run(r, losses, String.join("\n", out));
    }
}
