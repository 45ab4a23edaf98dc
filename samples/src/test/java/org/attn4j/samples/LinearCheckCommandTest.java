package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.attn4j.samples.io.Npy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.ops.transforms.Transforms;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/** {@code attn4j check --algo linear}: against independent numpy vectors, and its option rules. */
class LinearCheckCommandTest {

    @TempDir
    Path tmp;

    static Stream<Path> referenceCases() throws IOException {
        Path root = Path.of("..", "test-resources", "reference", "linear");
        assertTrue(Files.isDirectory(root), "reference vectors missing at " + root.toAbsolutePath());
        try (Stream<Path> dirs = Files.list(root)) {
            return dirs.filter(Files::isDirectory).sorted().toList().stream();
        }
    }

    /** Inputs and expected outputs written by numpy (test-resources/reference/linear_reference.py). */
    @ParameterizedTest(name = "{0}")
    @MethodSource("referenceCases")
    void matchesTheNumpyReferenceVectors(Path dir) throws IOException {
        JsonNode c = new ObjectMapper().readTree(dir.resolve("case.json").toFile());
        Path out = tmp.resolve("out");
        List<String> args = new ArrayList<>(List.of("check", "--algo", "linear", "--in", dir.toString(), "--out",
                out.toString(), "--decay", c.get("decay").asText()));
        if (c.get("causal").asBoolean()) {
            args.add("--causal");
        }
        CliRun run = CliRun.of(args.toArray(String[]::new));
        assertEquals(0, run.exitCode(), run.err());
        boolean f32 = "float32".equals(c.get("dtype").asText());
        for (String name : List.of("o", "dq", "dk", "dv")) {
            INDArray expected = Npy.read(dir.resolve("expected_" + name + ".npy"));
            INDArray actual = Npy.read(out.resolve(name + ".npy"));
            assertEquals(expected.dataType(), actual.dataType(), name);
            assertArrayEquals(expected.shape(), actual.shape(), name);
            INDArray e = expected.castTo(DataType.DOUBLE);
            double err = Transforms.abs(actual.castTo(DataType.DOUBLE).sub(e)).maxNumber().doubleValue()
                    / Transforms.abs(e).maxNumber().doubleValue();
            assertTrue(err <= (f32 ? 1e-5 : 1e-12), dir.getFileName() + " " + name + ": relative error " + err);
        }
        assertFalse(Files.exists(out.resolve("lse.npy")), "linear attention has no log-sum-exp");
        JsonNode stats = new ObjectMapper().readTree(out.resolve("stats.json").toFile());
        assertEquals("linear", stats.get("algo").asText());
        assertEquals(c.get("decay").asDouble(), stats.get("decay").asDouble());
        assertEquals("[{\"rank\":0,\"forward\":0,\"backward\":0}]", stats.get("bytes_sent").toString());
    }

    @Test
    void refusesOptionsThatDoNotFitTheAlgorithmInOneLine() throws IOException {
        Path in = Path.of("..", "test-resources", "reference", "linear", "noncausal-f64");
        String out = tmp.resolve("out").toString();
        assertOneLineError(CliRun.of("check", "--algo", "flash", "--decay", "0.9", "--in", in.toString(), "--out",
                out), "--decay applies to --algo linear only");
        assertOneLineError(CliRun.of("check", "--algo", "linear", "--scale", "0.5", "--in", in.toString(), "--out",
                out), "--scale does not apply to --algo linear");
        assertOneLineError(CliRun.of("check", "--algo", "linear", "--window", "4", "--in", in.toString(), "--out",
                out), "--window does not apply to --algo linear");
        assertOneLineError(CliRun.of("check", "--algo", "linear", "--decay", "1.5", "--causal", "--in",
                in.toString(), "--out", out), "--decay must be in (0, 1], got 1.5");
        assertOneLineError(CliRun.of("check", "--algo", "linear", "--decay", "0.9", "--in", in.toString(), "--out",
                out), "needs causal attention");
    }

    private static void assertOneLineError(CliRun run, String expected) {
        assertEquals(1, run.exitCode(), run.err());
        assertEquals(1, run.errLines().length, run.err());
        assertTrue(run.err().contains(expected), "'" + run.err().strip() + "' lacks '" + expected + "'");
    }
}
