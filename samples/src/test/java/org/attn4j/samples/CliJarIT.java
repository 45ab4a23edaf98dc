package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.io.Npy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The self-contained jar that {@code mvn package} builds ({@code samples/target/attn4j-cli.jar}), copied alone to a
 * directory outside the checkout and run with {@code java -jar}: it starts its own worker processes (the jar is
 * their class path) and gets the single-device answer; without the Vector API module it says how to start it.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CliJarIT {

    @TempDir
    Path dir;

    private Process java(Path jar, List<String> flags, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
                .toString()));
        cmd.addAll(flags);
        cmd.addAll(List.of("-jar", jar.getFileName().toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(jar.getParent().toFile()).redirectErrorStream(true);
        pb.environment().remove("CLASSPATH");
        return pb.start();
    }

    private static String finish(Process p) throws Exception {
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(240, TimeUnit.SECONDS), out);
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    @Test
    void theJarAloneRunsADistributedCheckWithItsOwnWorkers() throws Exception {
        Path jar = dir.resolve("attn4j-cli.jar");
        Files.copy(Path.of("target", "attn4j-cli.jar"), jar);
        CheckFixture f = CheckFixture.random(DataType.DOUBLE, 1, 2, 2, 32, 8, 5);
        f.writeTo(dir.resolve("in"));
        String out = finish(java(jar, List.of("--add-modules", "jdk.incubator.vector"), "check", "--algo", "ring",
                "--causal", "--workers", "2", "--worker-heap", "512m", "--in", "in", "--out", "out"));
        assertTrue(out.contains("check ring: float64"), out);
        AttentionOutput o = FlashAttention.defaults().forward(f.q(), f.k(), f.v(), AttentionMask.causal(),
                FlashAttention.defaultScale(8));
        INDArray got = Npy.read(dir.resolve("out").resolve("o.npy"));
        double err = got.sub(o.output()).norm2Number().doubleValue() / o.output().norm2Number().doubleValue();
        assertTrue(err <= 1e-12, "relative error " + err);

        String bare = finish(java(jar, List.of(), "--version"));
        assertTrue(bare.contains("--add-modules jdk.incubator.vector -jar attn4j-cli.jar"), bare);
    }
}
