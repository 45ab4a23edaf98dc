package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The launcher with small probe processes (no ND4J, no transport). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LocalLauncherTest {

    private final List<String> out = new CopyOnWriteArrayList<>();
    private final List<String> err = new CopyOnWriteArrayList<>();

    private LocalLauncher.Builder probe(int workers, String... args) {
        return LocalLauncher.builder(workers, LauncherProbe.class.getName()).args(List.of(args)).heap("64m")
                .output(out::add, err::add);
    }

    @Test
    void givesEachWorkerItsEnvironmentAndPrefixesItsOutput() throws Exception {
        LaunchResult r = probe(3, "hello", "a", "b").build().run();
        assertEquals(0, r.exitCode(), r.toString());
        assertTrue(r.succeeded());
        assertEquals(-1, r.firstFailedRank());
        for (int rank = 0; rank < 3; rank++) {
            String prefix = "[rank " + rank + "] hello from " + rank + " of 3 at 127.0.0.1:";
            assertTrue(out.stream().anyMatch(l -> l.startsWith(prefix)
                    && l.endsWith("OMP_NUM_THREADS=1 token 32 a b")), "stdout of rank " + rank + ": " + out);
            assertTrue(err.contains("[rank " + rank + "] note from " + rank), "stderr: " + err);
        }
        assertFalse(err.stream().anyMatch(l -> l.contains("incubator")), "the JVM's incubator notice is dropped");
    }

    @Test
    void workersGetTheBuildersFlagsAndThenThoseOfTheEnvironmentVariable() throws Exception {
        assertEquals(List.of(), LocalLauncher.workerJavaOptions(null));
        assertEquals(List.of(), LocalLauncher.workerJavaOptions("  "));
        assertEquals(List.of("-Xss2m", "-Da=b"), LocalLauncher.workerJavaOptions(" -Xss2m \t -Da=b\n"));
        LaunchResult r = probe(1, "flags").jvmArgs(List.of("-Dattn4j.probe=1")).build().run();
        assertEquals(0, r.exitCode(), r + " " + err);
        List<String> expected = new java.util.ArrayList<>(List.of("-Dattn4j.probe=1"));
        expected.addAll(LocalLauncher.workerJavaOptions(System.getenv(LocalLauncher.WORKER_JAVA_OPTS)));
        String flags = out.size() == 1 ? out.get(0).replaceAll(" -XX:(SharedArchiveFile|DumpLoadedClassList)=\\S+", "")
                : "";
        assertTrue(flags.endsWith(String.join(" ", expected)), "the worker's flags end with " + expected
                + " (before those of the class-data archive): " + out);
    }

    @Test
    void stopsTheOthersAndReturnsTheFirstFailure() throws Exception {
        LaunchResult r = probe(3, "fail", "1", "3").stopGrace(Duration.ofMillis(200)).build().run();
        assertEquals(3, r.exitCode(), r.toString());
        assertEquals(1, r.firstFailedRank());
        assertArrayEquals(new boolean[] {true, false, true}, r.stopped(), r.toString());
        assertFalse(r.timedOut());
        assertTrue(err.contains("[rank 1] rank 1 giving up"), err.toString());
    }

    @Test
    void globalTimeoutStopsEveryWorker() throws Exception {
        LaunchResult r = probe(2, "sleep").timeout(Duration.ofSeconds(2)).build().run();
        assertEquals(LocalLauncher.EXIT_TIMEOUT, r.exitCode(), r.toString());
        assertTrue(r.timedOut());
        assertArrayEquals(new boolean[] {true, true}, r.stopped());
    }

    @Test
    void perRankEnvironmentReachesOnlyThatRank() throws Exception {
        LaunchResult r = probe(2, "hello").rankEnv(1, "OMP_NUM_THREADS", "2").build().run();
        assertEquals(0, r.exitCode(), r.toString());
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 0]") && l.contains("OMP_NUM_THREADS=1")),
                out.toString());
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 1]") && l.contains("OMP_NUM_THREADS=2")),
                out.toString());
    }
}
