package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.training.DistributedTrainerParityTest;
import org.attn4j.distributed.training.TrainingFixtures;
import org.attn4j.distributed.training.TrainingWorker;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Four "hosts" on one machine: Linux network namespaces on a bridge, one IPv4 address and one worker each (and one
 * job with two workers on each of two hosts: IPC within a host, TCP between), started only with torchrun's
 * variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and the job token: no peer list, no loopback. Every sequence-parallel algorithm equals the single-device op, training reproduces the single-process
 * losses, and the faults across hosts end the job the way they should. Skipped, with the reason, where the process
 * cannot create namespaces.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class MultiHostProcessTest {

    private static final int HOSTS = 4;
    private static final int MASTER_PORT = 29500;
    private static NamespaceCluster cluster;

    @TempDir
    Path dir;

    @BeforeAll
    static void createHosts() throws Exception {
        java.util.Optional<String> why = NamespaceCluster.unavailable();
        Assumptions.assumeTrue(why.isEmpty(), () -> "skipped: " + why.orElseThrow());
        cluster = NamespaceCluster.create(HOSTS, 0);
    }

    @AfterAll
    static void removeHosts() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** A launch of {@code workers} processes, rank r in host r % 4, meeting at host 0. */
    private static LocalLauncher.Builder launcher(int workers, String mainClass, List<String> out) {
        return LocalLauncher.builder(workers, mainClass).rendezvous(cluster.address(0), MASTER_PORT)
                .prefix(r -> cluster.prefix(r % HOSTS)).heap("768m").timeout(Duration.ofSeconds(200))
                .env("ATTN4J_TIMEOUT_MS", "10000").output(out::add, out::add);
    }

    @Test
    void everyAlgorithmEqualsTheSingleDeviceOpAcrossHosts() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = launcher(HOSTS, MultiHostWorker.class.getName(), out).build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        for (int rank = 0; rank < HOSTS; rank++) {
            String endpoint = "[rank " + rank + "] ENDPOINT " + rank + " " + cluster.address(rank) + ":";
            assertTrue(out.stream().anyMatch(l -> l.startsWith(endpoint)), "rank " + rank + " binds its host's "
                    + "address, not loopback\n" + output);
        }
        for (SequenceAlgorithm a : SequenceAlgorithm.all()) {
            long ok = out.stream().filter(l -> l.contains("VERDICT " + a.name() + " OK")).count();
            assertEquals(HOSTS, ok, a.name() + ": every rank must report OK\n" + output);
        }
    }

    @Test
    void aJobWithTwoRanksOnEachOfTwoHostsUsesIpcWithinAHostAndUdpBetween() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(4, MultiHostWorker.class.getName())
                .rendezvous(cluster.address(0), MASTER_PORT).prefix(rank -> cluster.prefix(rank % 2)).heap("768m")
                .timeout(Duration.ofSeconds(200)).env("ATTN4J_TIMEOUT_MS", "10000").output(out::add, out::add)
                .build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        for (int rank = 0; rank < 4; rank++) {
            String endpoint = "[rank " + rank + "] ENDPOINT " + rank + " " + cluster.address(rank % 2) + ":";
            assertTrue(out.stream().anyMatch(l -> l.startsWith(endpoint)), "rank " + rank + " is on host " + rank % 2
                    + "\n" + output);
            // Host 0 runs ranks 0 and 2, host 1 ranks 1 and 3: each reaches its neighbour on the host over IPC
            // (one media driver per host) and the other host's two ranks over TCP (the default network).
            String ipc = "[rank " + rank + "] IPC-PEERS " + rank + " [" + (rank + 2) % 4 + "]";
            assertTrue(out.contains(ipc), ipc + "\n" + output);
            int other = 1 - rank % 2;
            String tcp = "[rank " + rank + "] TCP-PEERS " + rank + " [" + other + "," + (other + 2) + "]";
            assertTrue(out.contains(tcp), tcp + "\n" + output);
        }
        for (SequenceAlgorithm a : SequenceAlgorithm.all()) {
            long ok = out.stream().filter(l -> l.contains("VERDICT " + a.name() + " OK")).count();
            assertEquals(4, ok, a.name() + ": every rank must report OK\n" + output);
        }
    }

    @Test
    void sequenceParallelTrainingAcrossHostsReproducesTheSingleProcessLosses() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        String name = "wallfacer";
        long seed = 42 + name.hashCode();
        double[] expected = DistributedTrainerParityTest.singleProcess(DataType.DOUBLE, false,
                TrainingFixtures.HEADS / 2, seed, TrainingFixtures.batches(DataType.DOUBLE, 12, 4, 16, seed));
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = launcher(HOSTS, TrainingWorker.class.getName(), out)
                .args(List.of(dir.toString(), "12", "fresh", name, "1", "4", "PARAMETERS")).build().run();
        Map<Integer, Double> losses = losses(out);
        assertEquals(0, r.exitCode(), r + "\n" + String.join("\n", out));
        assertEquals(12, losses.size(), String.join("\n", out));
        for (int i = 0; i < 12; i++) {
            assertEquals(expected[i], losses.get(i), 1e-6 * Math.abs(expected[i]), "step " + i);
        }
    }

    @Test
    void aWorkerKilledInItsHostMakesEveryOtherRankFailNamingIt() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        AtomicBoolean killed = new AtomicBoolean();
        Consumer<String> watch = line -> {
            out.add(line);
            if (line.startsWith("[rank 0] LOSS 3 ") && killed.compareAndSet(false, true)) {
                try {
                    cluster.killAll(2);                      // SIGKILL from outside, as a host dying
                } catch (java.io.IOException e) {
                    out.add("could not kill: " + e);
                }
            }
        };
        LaunchResult r = LocalLauncher.builder(HOSTS, TrainingWorker.class.getName())
                .rendezvous(cluster.address(0), MASTER_PORT).prefix(cluster::prefix).heap("768m")
                .timeout(Duration.ofSeconds(200)).stopGrace(Duration.ofSeconds(60)).env("ATTN4J_TIMEOUT_MS", "10000")
                .output(watch, watch).args(List.of(dir.toString(), "200", "fresh")).build().run();
        String output = String.join("\n", out);
        assertTrue(killed.get(), output);
        assertEquals(137, r.exitCodes()[2], "rank 2 was SIGKILLed\n" + output);
        for (int rank : new int[] {0, 1, 3}) {
            assertNotEquals(0, r.exitCodes()[rank], "rank " + rank + " must fail\n" + output);
            assertFalse(r.stopped()[rank], "rank " + rank + " must exit by itself within the transport timeout\n"
                    + output);
            int k = rank;
            assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank " + k + "]") && l.contains("rank 2")),
                    "rank " + rank + " names rank 2\n" + output);
        }
    }

    @Test
    void aRankThatNeverStartsIsNamedByEveryStartedRank() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = launcher(3, MultiHostWorker.class.getName(), out).env("WORLD_SIZE", "4")
                .env("ATTN4J_RENDEZVOUS_TIMEOUT_MS", "8000").stopGrace(Duration.ofSeconds(60)).build().run();
        String output = String.join("\n", out);
        for (int rank = 0; rank < 3; rank++) {
            assertNotEquals(0, r.exitCodes()[rank], output);
            assertFalse(r.stopped()[rank], "rank " + rank + " exits by itself at the rendezvous timeout\n" + output);
            String prefix = "[rank " + rank + "]";
            assertTrue(out.stream().anyMatch(l -> l.startsWith(prefix) && l.contains("rank 3 of 4 never arrived "
                    + "within 8 s")), prefix + " names rank 3\n" + output);
        }
    }

    @Test
    void aWorkerWithAWrongTokenIsRefusedAndTheJobIsUnaffected() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = launcher(5, MultiHostWorker.class.getName(), out).env("WORLD_SIZE", "4")
                .rankEnv(4, "RANK", "1").rankEnv(4, "ATTN4J_JOB_TOKEN", LocalLauncher.newJobToken())
                .rankEnv(1, "ATTN4J_TEST_DELAY_MS", "8000")      // the intruder registers before the genuine rank 1
                .stopGrace(Duration.ofSeconds(150)).build().run();
        String output = String.join("\n", out);
        int[] codes = r.exitCodes();
        assertEquals(List.of(0, 0, 0, 0), List.of(codes[0], codes[1], codes[2], codes[3]), output);
        assertNotEquals(0, codes[4], output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 4]") && l.contains("refused this worker: wrong job "
                + "token")), output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 0]") && l.contains("refused 1 registration(s) "
                + "with a wrong job token")), output);
        assertEquals(HOSTS * SequenceAlgorithm.all().size(), out.stream().filter(l -> l.contains("VERDICT")
                && l.contains(" OK ")).count(), output);
    }

    private static Map<Integer, Double> losses(List<String> out) {
        Map<Integer, Double> losses = new TreeMap<>();
        for (String line : new ArrayList<>(out)) {
            if (line.startsWith("[rank 0] LOSS ")) {
                String[] f = line.substring("[rank 0] LOSS ".length()).split(" ");
                losses.put(Integer.parseInt(f[0]), Double.parseDouble(f[1]));
            }
        }
        return losses;
    }
}
