package org.attn4j.distributed.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The collectives in real worker processes over the Aeron transport, started by the {@link LocalLauncher}. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CommunicatorProcessTest {

    @TempDir
    Path tmp;

    private final List<String> out = new CopyOnWriteArrayList<>();

    private LocalLauncher.Builder workers(int p, String... args) {
        return LocalLauncher.builder(p, CollectiveWorker.class.getName()).args(List.of(args)).heap("512m")
                .timeout(Duration.ofSeconds(100)).output(out::add, out::add);
    }

    private String output() {
        return String.join("\n", out);
    }

    @ParameterizedTest(name = "P={0}")
    @ValueSource(ints = {2, 4})
    void matchesTheSingleProcessAnswerInRealProcesses(int p) throws Exception {
        LaunchResult r = workers(p, "checks", tmp.toString()).env("ATTN4J_TIMEOUT_MS", "20000").build().run();
        assertEquals(0, r.exitCode(), r + "\n" + output());
        for (int rank = 0; rank < p; rank++) {
            String verdict = "[rank " + rank + "] VERDICT rank " + rank + " OK ("
                    + 2 * CollectiveChecks.values().length + " checks";
            String line = out.stream().filter(l -> l.startsWith(verdict)).findFirst().orElse(null);
            assertTrue(line != null, "no verdict from rank " + rank + ":\n" + output());
            Matcher m = Pattern.compile("(\\d+) by single copy").matcher(line);
            assertTrue(m.find(), line);
            if (!"0".equals(System.getenv("ATTN4J_TRANSPORT_IPC"))) {
                // Same-host ranks over IPC: the blocks of 400 KB and more went from process to process by single copy.
                assertTrue(Long.parseLong(m.group(1)) > 0, line);
            } else {
                assertEquals(0, Long.parseLong(m.group(1)), "no single copy over the network: " + line);
            }
        }
    }

    @Test
    void everyWorkerExitsNamingTheRankThatDiedMidAllGather() throws Exception {
        Set<Path> before = aeronDirectories();
        // Transport timeout 5 s; the launcher stops any worker still running 10 s after the first failure (the
        // timeout plus 5 s for detection and JVM exit), and the test below fails if it had to stop one.
        LaunchResult r = workers(4, "die", "2").env("ATTN4J_TIMEOUT_MS", "5000").stopGrace(Duration.ofSeconds(10))
                .build().run();
        removeCrashedDrivers(before);
        // Rank 2 halted (exit code 3). Over TCP the others learn it from the closed connection at once and may exit
        // within the same millisecond, so which exit the launcher saw first is not asserted.
        assertEquals(3, r.exitCodes()[2], r + "\n" + output());
        assertTrue(r.firstFailedRank() >= 0, r.toString());
        // Rank 2 halts right after posting its part. Its block may be out by then (over IPC by single copy the
        // next rank reads it from rank 2's memory at once), so a rank whose own part of the ring completed may
        // finish with every block in place; every other live rank fails naming rank 2, and none hangs.
        int failed = 0;
        for (int rank : new int[] {0, 1, 3}) {
            assertFalse(r.stopped()[rank], "rank " + rank + " had to be stopped by the launcher: it hung\n" + output());
            if (r.exitCodes()[rank] == 0) {
                String ok = "[rank " + rank + "] rank " + rank + ": the all-gather succeeded after rank 2 halted, "
                        + "every block in place";
                assertTrue(out.contains(ok), "rank " + rank + " exited 0 without its line\n" + output());
                continue;
            }
            failed++;
            String line = failureLine(r, rank);
            // Over IPC the host's media driver runs in the first rank to start: when that was rank 2, the others
            // lose it with rank 2 and say so (documented), since no publication on the host moves without it.
            assertTrue(line.contains("allGather") && (line.contains("peer rank 2")
                    || line.contains("lost its media driver")), line + "\n" + output());
        }
        assertTrue(failed > 0, "no rank noticed that rank 2 halted mid-ring\n" + output());
    }

    @Test
    void whenTheRankRunningTheHostDriverDiesTheOthersSaySoAndBlameNoLiveRank() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse("0".equals(System.getenv("ATTN4J_TRANSPORT_IPC")),
                "without IPC every rank runs a driver of its own");
        Set<Path> before = aeronDirectories();
        LaunchResult r = workers(4, "die", "host-driver").env("ATTN4J_TIMEOUT_MS", "5000")
                .stopGrace(Duration.ofSeconds(10)).build().run();
        removeCrashedDrivers(before);
        int dead = -1;
        for (int rank = 0; rank < 4; rank++) {
            if (out.contains("[rank " + rank + "] rank " + rank + " halts now")) {
                dead = rank;
            }
        }
        assertTrue(dead >= 0, "no rank ran the host driver and halted\n" + output());
        assertEquals(3, r.exitCodes()[dead], r + "\n" + output());
        for (int rank = 0; rank < 4; rank++) {
            if (rank == dead) {
                continue;
            }
            String line = failureLine(r, rank);
            // With the driver gone, no same-host publication moves: a rank names the dead rank or its lost driver,
            // and never says that a live peer, silent with it, failed.
            for (int live = 0; live < 4; live++) {
                if (live != dead && live != rank) {
                    assertFalse(line.contains("peer rank " + live + " failed"), "blames live rank " + live + ": "
                            + line);
                }
            }
            assertTrue(line.contains("peer rank " + dead + " failed")
                    || line.contains("unreachable (tag") && line.contains("rank " + rank + " lost its media driver"),
                    line);
        }
    }

    @Test
    void aRankWaitingOnlyToReceiveBlamesItsLostDriverNotTheFirstSilentPeer() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeFalse("0".equals(System.getenv("ATTN4J_TRANSPORT_IPC")),
                "without IPC every rank runs a driver of its own");
        Set<Path> before = aeronDirectories();
        LaunchResult r = workers(4, "lose-driver").env("ATTN4J_TIMEOUT_MS", "5000")
                .stopGrace(Duration.ofSeconds(10)).build().run();
        removeCrashedDrivers(before);
        assertEquals(3, r.exitCodes()[1], r + "\n" + output());
        for (int rank : new int[] {0, 2, 3}) {
            String line = failureLine(r, rank);
            // No send of theirs stalls: only the silence of every peer at once tells them. Ranks 2 and 3 would
            // otherwise blame rank 0, the first silent peer they look at, alive and waiting like them.
            assertTrue(line.contains("rank " + rank + " lost its media driver"), line);
            assertFalse(line.contains("peer rank 0 failed") || line.contains("peer rank 2 failed")
                    || line.contains("peer rank 3 failed"), line);
        }
    }

    /**
     * The line {@code rank} printed when its collective failed, after checking that it exited 2 by itself (the
     * launcher did not have to stop it).
     */
    private String failureLine(LaunchResult r, int rank) {
        assertEquals(2, r.exitCodes()[rank], "rank " + rank + " exit code; " + r + "\n" + output());
        assertFalse(r.stopped()[rank], "rank " + rank + " had to be stopped by the launcher: it hung\n" + output());
        String prefix = "[rank " + rank + "] FAILED rank " + rank + ": ";
        return out.stream().filter(l -> l.startsWith(prefix)).findFirst()
                .orElseThrow(() -> new AssertionError("no failure line from rank " + rank + "\n" + output()));
    }

    /** The embedded media drivers' directories ({@code /dev/shm/attn4j-JOB-rankR-PID}). */
    private static Set<Path> aeronDirectories() throws IOException {
        Path shm = Path.of("/dev/shm");
        if (!Files.isDirectory(shm)) {
            return Set.of();
        }
        try (Stream<Path> s = Files.list(shm)) {
            return s.filter(d -> d.getFileName().toString().startsWith("attn4j-")).collect(Collectors.toSet());
        }
    }

    /** Deletes the directories that halted workers left behind (those whose process is gone). */
    private static void removeCrashedDrivers(Set<Path> before) throws IOException {
        for (Path d : aeronDirectories()) {
            String name = d.getFileName().toString();
            boolean gone;
            if (name.contains("-host")) {
                // The job's host driver (and its lock files): gone once no live driver runs in it.
                Path dir = Path.of(name.contains(".") ? d.toString().substring(0, d.toString().indexOf('.',
                        d.toString().lastIndexOf('/'))) : d.toString());
                gone = !io.aeron.CommonContext.isDriverActive(dir.toFile(), 3000, msg -> { });
            } else {
                long pid = Long.parseLong(name.substring(name.lastIndexOf('-') + 1));
                gone = ProcessHandle.of(pid).isEmpty();
            }
            if (!before.contains(d) && gone && Files.exists(d)) {
                try (Stream<Path> files = Files.walk(d)) {
                    for (Path f : files.sorted(java.util.Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(f);
                    }
                } catch (java.nio.file.NoSuchFileException e) {
                    // removed meanwhile (with the host driver's directory it belonged to)
                }
            }
        }
    }
}
