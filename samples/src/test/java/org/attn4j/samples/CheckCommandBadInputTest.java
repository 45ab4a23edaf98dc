package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

import org.attn4j.samples.io.Npy;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/** Every bad input of {@code attn4j check} exits non-zero with one line on stderr and no stack trace. */
class CheckCommandBadInputTest {

    @TempDir
    Path tmp;

    /** Spoils a valid input directory (or returns extra arguments) before the run. */
    interface Spoiler {
        List<String> spoil(Path in) throws IOException;
    }

    static Stream<Arguments> badInputs() {
        return Stream.of(
                bad("missing q.npy", "missing input", in -> delete(in.resolve("q.npy"))),
                bad("missing input directory", "input directory", in -> {
                    for (String f : List.of("q.npy", "k.npy", "v.npy", "do.npy")) {
                        Files.delete(in.resolve(f));
                    }
                    Files.delete(in);
                    return List.of();
                }),
                bad("q of rank 3", "q.npy has shape [2, 5, 4] (rank 3); expected rank 4",
                        in -> write(in, "q.npy", Nd4j.rand(DataType.FLOAT, 2, 5, 4))),
                bad("k and v shapes differ", "v.npy has shape [1, 2, 6, 4] but k.npy has [1, 2, 7, 4]",
                        in -> write(in, "v.npy", Nd4j.rand(DataType.FLOAT, 1, 2, 6, 4))),
                bad("dO shape differs from q", "do.npy has shape [1, 4, 7, 5] but q.npy has [1, 4, 7, 4]",
                        in -> write(in, "do.npy", Nd4j.rand(DataType.FLOAT, 1, 4, 7, 5))),
                bad("types differ", "k.npy is float64 but q.npy is float32",
                        in -> write(in, "k.npy", Nd4j.rand(DataType.DOUBLE, 1, 2, 7, 4))),
                bad("integer dtype", "q.npy has dtype '<i8'; expected float32 ('<f4') or float64 ('<f8')",
                        in -> {
                            CheckFixture.writeRaw(in.resolve("q.npy"), "<i8", "(1, 4, 7, 4)", new byte[8 * 112]);
                            return List.of();
                        }),
                bad("heads not a multiple", "q.npy has 4 heads, k.npy has 3; q heads must be a multiple",
                        in -> {
                            write(in, "k.npy", Nd4j.rand(DataType.FLOAT, 1, 3, 7, 4));
                            return write(in, "v.npy", Nd4j.rand(DataType.FLOAT, 1, 3, 7, 4));
                        }),
                bad("sequence lengths differ", "k.npy has sequence length N = 9 but q.npy has N = 7", in -> {
                    write(in, "k.npy", Nd4j.rand(DataType.FLOAT, 1, 2, 9, 4));
                    return write(in, "v.npy", Nd4j.rand(DataType.FLOAT, 1, 2, 9, 4));
                }),
                bad("N = 0", "q.npy has sequence length N = 0", in -> {
                    CheckFixture.writeRaw(in.resolve("q.npy"), "<f4", "(1, 4, 0, 4)", new byte[0]);
                    return List.of();
                }),
                bad("NaN values", "q.npy has 3 NaN values; inputs must be finite", in -> {
                    var q = Nd4j.rand(DataType.FLOAT, 1, 4, 7, 4);
                    q.putScalar(new long[] {0, 0, 0, 0}, Float.NaN);
                    q.putScalar(new long[] {0, 1, 2, 3}, Float.NaN);
                    q.putScalar(new long[] {0, 3, 6, 3}, Float.NaN);
                    return write(in, "q.npy", q);
                }),
                bad("infinite values", "v.npy has 1 infinite value; inputs must be finite", in -> {
                    var v = Nd4j.rand(DataType.FLOAT, 1, 2, 7, 4);
                    v.putScalar(new long[] {0, 1, 2, 3}, Float.NEGATIVE_INFINITY);
                    return write(in, "v.npy", v);
                }),
                bad("not an npy file", "k.npy is not a NumPy .npy file", in -> {
                    Files.writeString(in.resolve("k.npy"), "hello");
                    return List.of();
                }),
                bad("truncated file", "do.npy holds", in -> {
                    byte[] b = Files.readAllBytes(in.resolve("do.npy"));
                    Files.write(in.resolve("do.npy"), Arrays.copyOf(b, b.length - 10));
                    return List.of();
                }),
                bad("negative window", "--window must be >= 0 (0 = none), got -1",
                        in -> List.of("--window", "-1")),
                bad("zero scale", "--scale must be a finite positive number, got 0.0", in -> List.of("--scale", "0")),
                bad("negative scale", "--scale must be a finite positive number, got -2.0",
                        in -> List.of("--scale", "-2")),
                bad("NaN scale", "--scale must be a finite positive number, got NaN", in -> List.of("--scale", "NaN")),
                bad("infinite scale", "--scale must be a finite positive number, got Infinity",
                        in -> List.of("--scale", "Infinity")),
                bad("scale not a number", "'abc' is not a double", in -> List.of("--scale", "abc")),
                bad("unknown algorithm", "unknown algorithm 'nope'; expected one of flash",
                        in -> List.of("--algo", "nope")),
                bad("float document ids", "segments.npy has dtype '<f4'; expected int32 ('<i4') or int64 ('<i8')",
                        in -> write(in, "segments.npy", Nd4j.zeros(DataType.FLOAT, 1, 7))),
                bad("document ids of another length", "segments.npy has shape [1, 6]; expected [1, 7] (B and N of "
                        + "q.npy)", in -> {
                            CheckFixture.writeRaw(in.resolve("segments.npy"), "<i4", "(1, 6)", new byte[4 * 6]);
                            return List.of();
                        }),
                bad("a split document", "segments.npy: Documents: document id 0 of sequence 0 appears in two "
                        + "separate runs (from position 0 and from 4)", in -> {
                            byte[] ids = new byte[8 * 7];
                            java.nio.ByteBuffer.wrap(ids).order(java.nio.ByteOrder.LITTLE_ENDIAN).asLongBuffer()
                                    .put(new long[] {0, 0, 1, 1, 0, 0, 2});
                            CheckFixture.writeRaw(in.resolve("segments.npy"), "<i8", "(1, 7)", ids);
                            return List.of();
                        }));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badInputs")
    void refusesWithOneLineOnStderr(String what, String expectedMessage, Spoiler spoiler) throws IOException {
        Path in = CheckFixture.random(DataType.FLOAT, 1, 4, 2, 7, 4, 3L).writeTo(tmp.resolve("in"));
        List<String> args = new ArrayList<>(List.of("check", "--in", in.toString(), "--out",
                tmp.resolve("out").toString()));
        args.addAll(spoiler.spoil(in));
        CliRun run = CliRun.of(args.toArray(String[]::new));

        assertNotEquals(0, run.exitCode(), what);
        assertEquals(1, run.errLines().length, what + ": stderr was:\n" + run.err());
        String line = run.errLines()[0];
        assertTrue(line.startsWith("check: "), line);
        assertTrue(line.contains(expectedMessage), what + ": expected '" + expectedMessage + "' in: " + line);
        assertFalse(line.contains("Exception"), line);
        assertFalse(Files.exists(tmp.resolve("out").resolve("stats.json")), what + ": wrote stats.json anyway");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badCommandLines")
    void refusesBadCommandLinesWithOneLine(String what, String[] args) {
        CliRun run = CliRun.of(args);
        assertEquals(Attn4jCli.EXIT_USAGE, run.exitCode(), what);
        assertEquals(1, run.errLines().length, what + ": stderr was:\n" + run.err());
    }

    static Stream<Arguments> badCommandLines() {
        return Stream.of(
                Arguments.of("no subcommand", new String[] {}),
                Arguments.of("unknown subcommand", new String[] {"frobnicate"}),
                Arguments.of("check without --in", new String[] {"check", "--out", "x"}),
                Arguments.of("unknown option", new String[] {"check", "--in", "a", "--out", "b", "--bogus"}),
                Arguments.of("bench without a benchmark", new String[] {"bench"}));
    }

    private static Arguments bad(String what, String message, Spoiler spoiler) {
        return Arguments.of(what, message, spoiler);
    }

    private static List<String> delete(Path file) throws IOException {
        Files.delete(file);
        return List.of();
    }

    private static List<String> write(Path in, String name, org.nd4j.linalg.api.ndarray.INDArray a)
            throws IOException {
        Npy.write(in.resolve(name), a);
        return List.of();
    }
}
