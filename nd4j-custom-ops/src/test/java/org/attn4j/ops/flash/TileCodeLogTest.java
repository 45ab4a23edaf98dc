package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The first flash call on a path logs one line through slf4j naming the tile code and why, and later calls log
 * nothing: checked in child JVMs ({@link TileCodeLogProbe}, with slf4j-simple as the binding), since a JVM logs each
 * path once and the Vector API module can only be left out when a JVM starts.
 */
class TileCodeLogTest {

    private static final String LOGGER = " org.attn4j.ops.flash.FlashAttention - ";
    private static final long TIMEOUT_SECONDS = 180;

    @TempDir
    Path tmp;

    @Test
    void firstCallOnEachPathLogsOneLineAndLaterCallsNone() throws Exception {
        List<String> lines = flashLog(true, "-", "-", "attn4j.nativeTiles=false", "attn4j.nativeTiles=false");
        assertEquals(2, lines.size(), "two paths, two lines: " + lines);
        if (nativeCodeExpected()) {
            assertEquals("[main] INFO" + LOGGER + "FlashAttention runs: native AVX-512 tile code (libattn4jtiles.so "
                    + "loaded, the CPU has AVX-512F)", lines.get(0));
        } else {
            // A host without the native code: the warning names the cause (NativeTileMathTest fails there too).
            assertTrue(lines.get(0).startsWith("[main] WARN" + LOGGER + "FlashAttention runs: Java Vector API tile "
                    + "pass and OpenBLAS products (native tile code not in use: "), lines.get(0));
        }
        assertEquals("[main] INFO" + LOGGER + "FlashAttention runs: Java Vector API tile pass and OpenBLAS products "
                + "(native tile code not in use: turned off by -Dattn4j.nativeTiles=false)", lines.get(1));
    }

    @Test
    void warnsOnceWithWhatToDoWhenTheVectorApiModuleIsMissing() throws Exception {
        List<String> lines = flashLog(false, "-", "-");
        assertEquals(1, lines.size(), "one path, one line: " + lines);
        String line = lines.get(0);
        assertTrue(line.startsWith("[main] WARN" + LOGGER + "FlashAttention runs: " + (nativeCodeExpected()
                ? "native AVX-512 tile code, masks and float64 tiles by ND4J element-wise ops (Vector API not in use: "
                : "ND4J element-wise ops and OpenBLAS products (native tile code not in use: ")), line);
        assertTrue(line.contains("the module jdk.incubator.vector is not present: run Java with --add-modules "
                + "jdk.incubator.vector"), line);
    }

    /** Whether this host should run the native code: the library is in the classes and the CPU has AVX-512F. */
    private static boolean nativeCodeExpected() throws IOException {
        return NativeTileMath.class.getResource(NativeTileMath.RESOURCE) != null
                && Files.readString(Path.of("/proc/cpuinfo")).contains(" avx512f");
    }

    /** FlashAttention's log lines from a child JVM that runs {@link TileCodeLogProbe} with {@code phases}. */
    private List<String> flashLog(boolean vectorModule, String... phases) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx512m"));
        if (vectorModule) {
            cmd.addAll(List.of("--add-modules", "jdk.incubator.vector"));
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), TileCodeLogProbe.class.getName()));
        cmd.addAll(List.of(phases));
        Path out = tmp.resolve("out.txt");
        Path err = tmp.resolve("err.txt");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile());
        pb.environment().put("OMP_NUM_THREADS", "1");
        pb.environment().put("OPENBLAS_NUM_THREADS", "1");
        Process p = pb.start();
        if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            fail("the child JVM did not finish within " + TIMEOUT_SECONDS + " s; stderr:\n" + Files.readString(err));
        }
        String stderr = Files.readString(err);
        assertEquals(0, p.exitValue(), "child JVM exit code; stderr:\n" + stderr);
        assertEquals("calls done", Files.readString(out).strip(), "child's stdout; stderr:\n" + stderr);
        return stderr.lines().filter(l -> l.contains(LOGGER)).toList();
    }
}
