package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench threading}: the evidence behind the threading policy. Times the flash op under
 * several splits of the cores between ND4J's native threads (OpenMP, OpenBLAS) and attn4j's Java worker
 * threads, all in one run, and writes the table into the {@code threading} section of
 * {@code docs/threading.md}.
 */
@Command(name = "threading", mixinStandardHelpOptions = true,
        description = "Time flash attention under several native / Java thread splits; writes a section of "
                + "OUT/threading.md.")
public final class ThreadingBenchCommand implements Callable<Integer> {

    @Option(names = "--n", paramLabel = "N", defaultValue = "4096", description = "Sequence length (default: "
            + "${DEFAULT-VALUE}).")
    int n;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "3",
            description = "Timed runs per configuration in each of 3 rounds, median of all reported "
                    + "(default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory of threading.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    /** One split of the cores; {@code policy} marks what attn4j does by default. */
    /** {@code pin}: null for attn4j's policy (pin while OpenBLAS runs inside), else forced on or off. */
    private record Config(String name, int nativeThreads, int javaThreads, Boolean pin, Tiles tiles,
                          boolean policy) {
    }

    /** The code between and around the products of a tile (FlashAttention's tile math and products). */
    private enum Tiles {
        /** Native AVX-512 tile math and products, where the library loads (the default). */
        NATIVE,
        /** The Java Vector API tile pass and OpenBLAS's gemm ({@code attn4j.nativeTiles=false}). */
        VECTOR,
        /** ND4J element-wise ops and OpenBLAS's gemm ({@code attn4j.noVector=true}). */
        ND4J
    }

    private record Row(Config config, double forwardMs, double forwardBackwardMs) {
    }

    private static final int ROUNDS = 3;

    @Override
    public Integer call() throws IOException {
        Options.outputDirectory("--out", out);
        if (n < 1 || repeats < 1) {
            throw new UserInputException("--n and --repeats must be >= 1, got " + n + " and " + repeats);
        }
        int cores = Runtime.getRuntime().availableProcessors();
        List<Config> configs = List.of(
                new Config("attn4j policy: " + cores + " Java threads, native tile code, ND4J native thread count "
                        + cores + " left as it is (the tile code does not use it)", cores, cores, null, Tiles.NATIVE,
                        true),
                new Config(cores + " Java threads, native tile code, ND4J native threads pinned to 1 during the run",
                        cores, cores, true, Tiles.NATIVE, false),
                new Config("1 Java thread, ND4J native thread count " + cores, cores, 1, null, Tiles.NATIVE, false),
                new Config("1 Java thread, ND4J native thread count 1", 1, 1, null, Tiles.NATIVE, false),
                new Config("attn4j policy for OpenBLAS products and the Java Vector API tile pass: native threads "
                        + "pinned to 1 during the run", cores, cores, null, Tiles.VECTOR, false),
                new Config("OpenBLAS products and the Java Vector API tile pass, ND4J native thread count left at "
                        + cores + " (not pinned)", cores, cores, false, Tiles.VECTOR, false),
                new Config("attn4j policy, ND4J element-wise ops and OpenBLAS products instead of the native code",
                        cores, cores, null, Tiles.ND4J, false));
        String defaultTiles = FlashAttention.tileCode();
        PrintWriter log = spec.commandLine().getOut();
        INDArray q = Nd4j.getRandomFactory().getNewRandomInstance(1).nextGaussian(new long[] {1, 1, n, 64})
                .castTo(DataType.FLOAT);
        INDArray k = Nd4j.getRandomFactory().getNewRandomInstance(2).nextGaussian(new long[] {1, 1, n, 64})
                .castTo(DataType.FLOAT);
        INDArray v = Nd4j.getRandomFactory().getNewRandomInstance(3).nextGaussian(new long[] {1, 1, n, 64})
                .castTo(DataType.FLOAT);
        var env = Nd4j.getEnvironment();
        int savedThreads = env.maxThreads();
        int savedBlas = Nd4j.factory().blas().getMaxThreads();
        // Rounds over all configurations, so drift on a shared machine hits them alike; the first round
        // only warms up (the JIT compiles the vector tile pass after a few calls).
        double[][] forward = new double[configs.size()][ROUNDS * repeats];
        double[][] forwardBackward = new double[configs.size()][ROUNDS * repeats];
        try {
            for (int round = -1; round < ROUNDS; round++) {
                for (int i = 0; i < configs.size(); i++) {
                    Config c = configs.get(i);
                    apply(c);
                    FlashAttention op = FlashAttention.defaults().withThreads(c.javaThreads());
                    // One untimed call after each switch: the previous configuration's native threads may still be
                    // spinning, and its first call pays for them.
                    timeOnce(op, q, k, v);
                    for (int r = 0; r < repeats; r++) {
                        double[] t = timeOnce(op, q, k, v);
                        if (round >= 0) {
                            forward[i][round * repeats + r] = t[0];
                            forwardBackward[i][round * repeats + r] = t[1];
                        }
                    }
                }
            }
        } finally {
            System.clearProperty("attn4j.pinNativeThreads");
            System.clearProperty("attn4j.noVector");
            System.clearProperty("attn4j.nativeTiles");
            env.setMaxThreads(savedThreads);
            env.setMaxMasterThreads(savedThreads);
            Nd4j.factory().blas().setMaxThreads(savedBlas);
        }
        List<Row> rows = new ArrayList<>();
        for (int i = 0; i < configs.size(); i++) {
            Row r = new Row(configs.get(i), GemmRate.median(forward[i]), GemmRate.median(forwardBackward[i]));
            rows.add(r);
            log.printf(Locale.ROOT, "%-110s forward %8.1f ms  forward+backward %8.1f ms%n", r.config().name(),
                    r.forwardMs(), r.forwardBackwardMs());
        }
        log.flush();
        Files.createDirectories(out);
        MarkdownSection.replace(out.resolve("threading.md"), "threading", markdown(rows, defaultTiles));
        log.printf("wrote the 'threading' section of %s%n", out.resolve("threading.md"));
        log.flush();
        return 0;
    }

    private static void apply(Config c) {
        var env = Nd4j.getEnvironment();
        env.setMaxThreads(c.nativeThreads());
        env.setMaxMasterThreads(c.nativeThreads());
        Nd4j.factory().blas().setMaxThreads(c.nativeThreads());
        if (c.pin() == null) {
            System.clearProperty("attn4j.pinNativeThreads");
        } else {
            System.setProperty("attn4j.pinNativeThreads", Boolean.toString(c.pin()));
        }
        System.setProperty("attn4j.noVector", Boolean.toString(c.tiles() == Tiles.ND4J));
        System.setProperty("attn4j.nativeTiles", Boolean.toString(c.tiles() == Tiles.NATIVE));
    }

    /** Forward ms and forward+backward ms of one call. */
    private static double[] timeOnce(FlashAttention op, INDArray q, INDArray k, INDArray v) {
        AttentionMask mask = AttentionMask.none();
        long t0 = System.nanoTime();
        AttentionOutput o = op.forward(q, k, v, mask);
        long t1 = System.nanoTime();
        AttentionGradients g = op.backward(q, k, v, o.output(), o.lse(), o.output(), mask,
                FlashAttention.defaultScale(q.size(3)));
        long t2 = System.nanoTime();
        for (INDArray a : new INDArray[] {o.output(), o.lse(), g.dq(), g.dk(), g.dv()}) {
            a.close();
        }
        return new double[] {(t1 - t0) / 1e6, (t2 - t0) / 1e6};
    }

    private String markdown(List<Row> rows, String defaultTiles) {
        Row policy = rows.get(0);
        StringBuilder md = new StringBuilder();
        md.append(String.format(Locale.ROOT, "`./attn4j bench threading` on %s. Flash attention, N = %d, D = 64, "
                + "one head, float32, full mask, in one process; each time is the median of %d runs (%d rounds over "
                + "all configurations after a warm-up round). The native thread count is set at run time through "
                + "ND4J (`Environment.setMaxThreads`, `Blas.setMaxThreads`); the process started with "
                + "OMP_NUM_THREADS=%s. Tile code by default: %s.%n%n", MachineInfo.current().describe(), n,
                ROUNDS * repeats, ROUNDS, System.getenv().getOrDefault("OMP_NUM_THREADS", "unset"), defaultTiles));
        md.append("| configuration | forward ms | forward+backward ms | time / policy (fwd+bwd) |\n");
        md.append("|---|---:|---:|---:|\n");
        for (Row r : rows) {
            md.append(String.format(Locale.ROOT, "| %s%s | %.1f | %.1f | %.2f |%n", r.config().name(),
                    r.config().policy() ? " **(default)**" : "", r.forwardMs(), r.forwardBackwardMs(),
                    r.forwardBackwardMs() / policy.forwardBackwardMs()));
        }
        return md.toString();
    }
}
