package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.io.Npy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.ops.transforms.Transforms;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/** {@code attn4j check} on valid inputs: the files it writes and what they hold. */
class CheckCommandTest {

    @TempDir
    Path tmp;

    static Stream<Arguments> cases() {
        // type, B, H, Hkv, N, D, causal, window, scale (null = default), seed
        return Stream.of(
                Arguments.of(DataType.FLOAT, 1, 2, 2, 37, 16, false, 0, null, 11L),
                Arguments.of(DataType.DOUBLE, 2, 2, 2, 29, 8, true, 0, null, 12L),
                Arguments.of(DataType.FLOAT, 1, 4, 2, 45, 8, true, 5, null, 13L),
                Arguments.of(DataType.DOUBLE, 1, 3, 1, 23, 12, false, 3, 0.3, 14L));
    }

    @ParameterizedTest(name = "{0} B={1} H={2} Hkv={3} N={4} D={5} causal={6} window={7} scale={8}")
    @MethodSource("cases")
    void writesOutputsEqualToCallingTheOpDirectly(DataType type, int b, int h, int hkv, int n, int d,
                                                  boolean causal, int window, Double scale, long seed)
            throws IOException {
        CheckFixture in = CheckFixture.random(type, b, h, hkv, n, d, seed);
        Path out = tmp.resolve("out");
        CliRun run = CliRun.of(args(in.writeTo(tmp.resolve("in")), out, causal, window, scale));
        assertEquals(0, run.exitCode(), "seed " + seed + ": " + run.err());
        assertEquals("", run.err());

        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        double s = scale == null ? FlashAttention.defaultScale(d) : scale;
        AttentionOutput f = FlashAttention.defaults().forward(in.q(), in.k(), in.v(), mask, s);
        AttentionGradients g = FlashAttention.defaults().backward(in.q(), in.k(), in.v(), f.output(), f.lse(),
                in.dO(), mask, s);
        assertWritten(out.resolve("o.npy"), f.output(), new long[] {b, h, n, d}, type, seed);
        assertWritten(out.resolve("lse.npy"), f.lse(), new long[] {b, h, n}, type, seed);
        assertWritten(out.resolve("dq.npy"), g.dq(), new long[] {b, h, n, d}, type, seed);
        assertWritten(out.resolve("dk.npy"), g.dk(), new long[] {b, hkv, n, d}, type, seed);
        assertWritten(out.resolve("dv.npy"), g.dv(), new long[] {b, hkv, n, d}, type, seed);
    }

    @Test
    void statsJsonHoldsTimingsMemoryAndBytesPerRank() throws IOException {
        Path in = CheckFixture.random(DataType.FLOAT, 1, 2, 1, 19, 8, 5L).writeTo(tmp.resolve("in"));
        Path out = tmp.resolve("out");
        CliRun run = CliRun.of("check", "--algo", "flash", "--in", in.toString(), "--out", out.toString(),
                "--causal", "--window", "4");
        assertEquals(0, run.exitCode(), run.err());

        JsonNode stats = new ObjectMapper().readTree(out.resolve("stats.json").toFile());
        for (String key : List.of("algo", "workers", "forward_ms", "backward_ms", "peak_bytes",
                "peak_bytes_measure", "bytes_sent", "dtype", "shape", "causal", "window", "scale")) {
            assertTrue(stats.has(key), "stats.json lacks " + key + ": " + stats);
        }
        assertEquals("flash", stats.get("algo").asText());
        assertEquals(1, stats.get("workers").asInt());
        assertEquals("float32", stats.get("dtype").asText());
        assertTrue(stats.get("causal").asBoolean());
        assertEquals(4, stats.get("window").asInt());
        assertEquals(1 / Math.sqrt(8), stats.get("scale").asDouble(), 1e-15);
        assertEquals("[1,2,19,8]", stats.get("shape").get("q").toString());
        assertEquals("[1,1,19,8]", stats.get("shape").get("k").toString());
        assertTrue(stats.get("forward_ms").asDouble() > 0 && stats.get("backward_ms").asDouble() > 0);
        assertTrue(stats.get("peak_bytes").asLong() > 0);
        assertEquals("[{\"rank\":0,\"forward\":0,\"backward\":0}]", stats.get("bytes_sent").toString());
    }

    static Stream<Path> referenceCases() throws IOException {
        Path root = Path.of("..", "test-resources", "reference", "flash");
        assertTrue(Files.isDirectory(root), "reference vectors missing at " + root.toAbsolutePath());
        try (Stream<Path> dirs = Files.list(root)) {
            return dirs.filter(Files::isDirectory).sorted().toList().stream();
        }
    }

    /** Inputs and expected outputs written by numpy (test-resources/reference/flash_reference.py). */
    @ParameterizedTest(name = "{0}")
    @MethodSource("referenceCases")
    void matchesTheNumpyReferenceVectors(Path dir) throws IOException {
        JsonNode c = new ObjectMapper().readTree(dir.resolve("case.json").toFile());
        Path out = tmp.resolve("out");
        CliRun run = CliRun.of(args(dir, out, c.get("causal").asBoolean(), c.get("window").asInt(),
                c.get("scale").asDouble()));
        assertEquals(0, run.exitCode(), run.err());
        boolean f32 = "float32".equals(c.get("dtype").asText());
        for (String name : List.of("o", "lse", "dq", "dk", "dv")) {
            INDArray expected = Npy.read(dir.resolve("expected_" + name + ".npy"));
            INDArray actual = Npy.read(out.resolve(name + ".npy"));
            assertEquals(expected.dataType(), actual.dataType(), name);
            assertArrayEquals(expected.shape(), actual.shape(), name);
            double err = Transforms.abs(actual.castTo(DataType.DOUBLE).sub(expected.castTo(DataType.DOUBLE)))
                    .maxNumber().doubleValue();
            assertTrue(err <= (f32 ? 1e-4 : 1e-10), dir.getFileName() + " " + name + ": max abs error " + err);
        }
    }

    private static String[] args(Path in, Path out, boolean causal, int window, Double scale) {
        List<String> a = new java.util.ArrayList<>(List.of("check", "--algo", "flash", "--in", in.toString(),
                "--out", out.toString(), "--window", Integer.toString(window)));
        if (causal) {
            a.add("--causal");
        }
        if (scale != null) {
            a.add("--scale");
            a.add(Double.toString(scale));
        }
        return a.toArray(String[]::new);
    }

    private static void assertWritten(Path file, INDArray direct, long[] shape, DataType type, long seed)
            throws IOException {
        INDArray written = Npy.read(file);
        assertEquals(type, written.dataType(), file.getFileName() + " type");
        assertArrayEquals(shape, written.shape(), file.getFileName() + " shape");
        // The op sums dk/dv over worker threads whose order may vary: equal up to rounding, not bitwise.
        double tolerance = type == DataType.FLOAT ? 1e-5 : 1e-12;
        double scaleOf = Math.max(1.0, Transforms.abs(direct).maxNumber().doubleValue());
        double err = Transforms.abs(written.sub(direct)).maxNumber().doubleValue();
        assertTrue(err <= tolerance * scaleOf, "seed " + seed + ": " + file.getFileName() + " differs by " + err);
    }
}
