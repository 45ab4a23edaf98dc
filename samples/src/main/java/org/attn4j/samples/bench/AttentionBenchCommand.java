package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.metrics.PeakMemory;
import org.nd4j.linalg.api.buffer.DataType;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench attention}: attn4j's flash attention against ND4J's stock op and the gemm floor, over
 * N = 1K, 2K, ..., {@code --max-n}; writes {@code bench-attention.csv}, {@code bench-attention.png} and the
 * {@code attention} section of {@code benchmarks.md} into {@code --out}.
 */
@Command(name = "attention", mixinStandardHelpOptions = true,
        description = {"Time attn4j flash attention, ND4J's stock DotProductAttention and the gemm floor "
                + "against N (float32 unless --dtype float64), and PyTorch's fused CPU kernel beside them with --compare-libtorch.",
            "Writes OUT/bench-attention.csv, OUT/bench-attention.png and a section of OUT/benchmarks.md "
                + "(other shapes than B = H = 1 in files and a section of their own, e.g. bench-attention-b1-h8)."})
public final class AttentionBenchCommand implements Callable<Integer> {

    @Option(names = "--max-n", paramLabel = "N", defaultValue = "131072",
            description = "Largest sequence length (default: ${DEFAULT-VALUE}); above 65536 forward only.")
    int maxN;

    @Option(names = "--min-n", paramLabel = "N", defaultValue = "1024",
            description = "Smallest sequence length; N doubles from here (default: ${DEFAULT-VALUE}).")
    int minN;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV, chart and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Option(names = "--head-dim", paramLabel = "D", defaultValue = "64",
            description = "Head size D (default: ${DEFAULT-VALUE}).")
    int headDim;

    @Option(names = "--stock-max-n", paramLabel = "N", defaultValue = "32768",
            description = {"Skip ND4J's stock op above this N, where its N x N score matrix is known to take "
                    + "minutes and tens of GB (default: ${DEFAULT-VALUE}; 65536 took 434 s and 17 GB)."})
    int stockMaxN;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "3",
            description = "Timed runs per configuration up to --repeat-max-n (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--repeat-max-n", paramLabel = "N", defaultValue = "8192",
            description = "Above this N one timed run without warm-up (default: ${DEFAULT-VALUE}).")
    int repeatMaxN;

    @Option(names = "--warm-up", paramLabel = "SECONDS", defaultValue = "6",
            description = "How long attn4j runs untimed at the smallest N before anything is timed, so the JIT has "
                    + "compiled its Java tile code (default: ${DEFAULT-VALUE}).")
    double warmUpSeconds;

    @Option(names = "--settle", paramLabel = "SECONDS", defaultValue = "0.5",
            description = "How long each configuration runs untimed before its timed runs, up to --repeat-max-n "
                    + "(default: ${DEFAULT-VALUE}; shorter left the first runs after a collection slow).")
    double settleSeconds;

    @Option(names = "--batch", paramLabel = "B", defaultValue = "1",
            description = "Sequences per call, B (default: ${DEFAULT-VALUE}).")
    int batch;

    @Option(names = "--heads", paramLabel = "H", defaultValue = "1",
            description = "Heads per sequence, H, for queries, keys and values (default: ${DEFAULT-VALUE}).")
    int heads;

    @Option(names = "--compare-libtorch", paramLabel = "DIR",
            description = {"Also time PyTorch's scaled_dot_product_attention at every N, right after attn4j, by "
                    + "running DIR/run.sh (the libtorch anchor, a separate program printing "
                    + "impl,threads,N,causal,fwd_ms,fwdbwd_ms lines; not part of attn4j); B = 1 only."})
    Path libtorch;

    @Option(names = "--gemm-size", paramLabel = "S", defaultValue = "1024",
            description = "S for the S^3 gemms that measure the floor's rate (default: ${DEFAULT-VALUE}).")
    int gemmSize;

    /** The element types the benchmark takes. */
    enum Precision {
        float32(DataType.FLOAT), float64(DataType.DOUBLE);

        final DataType dataType;

        Precision(DataType dataType) {
            this.dataType = dataType;
        }
    }

    @Option(names = "--dtype", paramLabel = "TYPE", defaultValue = "float32",
            description = {"Element type of the inputs and of the floor's gemms: ${COMPLETION-CANDIDATES} "
                    + "(default: ${DEFAULT-VALUE}); float64 results go to files and a section of their own "
                    + "(e.g. bench-attention-f64)."})
    Precision dtype;

    @Option(names = "--kernel", paramLabel = "KERNEL", defaultValue = "cpu",
            description = {"cpu: attn4j's CPU kernel; portable: also the portable kernel (ND4J operations only, the "
                    + "path of other backends) beside it, in a section of its own (default: ${DEFAULT-VALUE})."})
    String kernel;

    @Spec
    CommandSpec spec;

    /** Above this N the backward pass is not timed (the issue asks for forward-only rows there). */
    static final int BACKWARD_MAX_N = 65536;

    @Override
    public Integer call() throws IOException {
        Options.atLeast("--stock-max-n", stockMaxN, 0);
        Options.atLeast("--repeat-max-n", repeatMaxN, 0);
        Options.atLeast("--warm-up", warmUpSeconds, 0);
        Options.atLeast("--settle", settleSeconds, 0);
        validate();
        PrintWriter log = spec.commandLine().getOut();
        Files.createDirectories(out);
        MachineInfo machine = MachineInfo.current();
        log.printf(Locale.ROOT, "bench attention: N %d..%d, B %d, H %d, D %d, %d cores, OMP_NUM_THREADS=%s%n", minN,
                maxN, batch, heads, headDim, machine.cores(), machine.ompNumThreads());
        GemmRate gemm = GemmRate.measure(gemmSize, dtype.dataType);
        log.printf(Locale.ROOT, "gemm %s %d^3: %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d threads%n",
                dtype, gemmSize, gemm.oneThread() / 1e9, gemm.allThreads() / 1e9, gemm.threads());
        log.flush();

        AttentionBench.Settings settings = new AttentionBench.Settings(minN, maxN, headDim, BACKWARD_MAX_N,
                stockMaxN, repeats, repeatMaxN, gemmSize, batch, heads,
                libtorch == null ? null : libtorch.toAbsolutePath(), dtype.dataType, kernel.equals("portable"),
                warmUpSeconds, settleSeconds);
        List<BenchResult> rows = new AttentionBench(settings, log).run(gemm);

        Path csv = out.resolve(AttentionBenchReport.csv(settings));
        Path png = out.resolve(AttentionBenchReport.png(settings));
        String name = AttentionBenchReport.section(settings);
        AttentionBenchReport.writeCsv(csv, rows);
        AttentionBenchReport.writeChart(png, rows, settings);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        String section = AttentionBenchReport.markdown(rows, settings, gemm, machine, command.strip(),
                PeakMemory.measure());
        try {
            MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), name, section);
        } catch (IllegalStateException e) {
            throw new UserInputException(e.getMessage(), e);
        }
        log.printf("wrote %s, %s and the '%s' section of %s%n", csv, png, name,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    private void validate() {
        if (!kernel.equals("cpu") && !kernel.equals("portable")) {
            throw new UserInputException("--kernel must be cpu or portable, got " + kernel);
        }
        if (minN < 1) {
            throw new UserInputException("--min-n must be >= 1, got " + minN);
        }
        if (maxN < minN) {
            throw new UserInputException("--max-n must be >= --min-n (" + minN + "), got " + maxN);
        }
        if (headDim < 1) {
            throw new UserInputException("--head-dim must be >= 1, got " + headDim);
        }
        if (repeats < 1) {
            throw new UserInputException("--repeats must be >= 1, got " + repeats);
        }
        if (batch < 1) {
            throw new UserInputException("--batch must be >= 1, got " + batch);
        }
        if (libtorch != null && dtype != Precision.float32) {
            throw new UserInputException("--compare-libtorch runs the anchor in float32 only, got --dtype " + dtype);
        }
        if (heads < 1) {
            throw new UserInputException("--heads must be >= 1, got " + heads);
        }
        if (libtorch != null && !Files.isRegularFile(LibtorchAnchor.script(libtorch))) {
            throw new UserInputException("--compare-libtorch expects a directory holding run.sh (the libtorch "
                    + "anchor), got " + libtorch);
        }
        if (libtorch != null && batch != 1) {
            throw new UserInputException("--compare-libtorch times B = 1 only (the anchor's shapes), got --batch "
                    + batch);
        }
        if (gemmSize < 1) {
            throw new UserInputException("--gemm-size must be >= 1, got " + gemmSize);
        }
        if (Files.exists(out) && !Files.isDirectory(out)) {
            throw new UserInputException("--out " + out + " exists and is not a directory");
        }
    }
}
