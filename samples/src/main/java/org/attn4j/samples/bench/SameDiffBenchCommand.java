package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.metrics.PeakMemory;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench samediff}: forward + backward through a SameDiff graph, one head, float32, for the attn4j
 * SameDiff functions and for SameDiff's own attention built from {@code mmul} and {@code softmax}; time (median) and
 * the process's peak resident size, each configuration in its own JVM. Writes {@code bench-samediff.csv} and the
 * {@code samediff} section of {@code benchmarks.md}.
 */
@Command(name = "samediff", mixinStandardHelpOptions = true,
        description = {"Forward + backward through SameDiff: attn4j functions vs SameDiff's own attention; time and "
            + "peak memory.", "Writes OUT/bench-samediff.csv and a section of OUT/benchmarks.md."})
public final class SameDiffBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-samediff.csv";
    static final String SECTION = "samediff";

    @Option(names = "--lengths", paramLabel = "N", split = ",", defaultValue = "4096,8192,32768",
            description = "Sequence lengths (default: ${DEFAULT-VALUE}).")
    List<Integer> lengths;

    @Option(names = "--stock-max", paramLabel = "N", defaultValue = "8192",
            description = "Longest N for SameDiff's own attention, which builds N x N arrays (default: "
                    + "${DEFAULT-VALUE}).")
    int stockMax;

    @Option(names = "--head-dim", paramLabel = "D", defaultValue = "64", description = "Head size (default: "
            + "${DEFAULT-VALUE}).")
    int headDim;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "3",
            description = "Timed passes; the median is reported (default: "
            + "${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--limit", paramLabel = "S", defaultValue = "600",
            description = "Seconds per configuration before it is reported as not finished (default: "
                    + "${DEFAULT-VALUE}).")
    int limit;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "4g",
            description = "Heap per process (default: ${DEFAULT-VALUE}).")
    String heap;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    record Row(String kind, int n, double medianMs, long baselineBytes, long peakBytes, String failure) {
    }

    @Override
    public Integer call() throws Exception {
        Options.atLeast("--stock-max", stockMax, 0);
        Options.atLeast("--limit", limit, 1);
        Options.heap("--heap", heap);
        Options.outputDirectory("--out", out);
        for (int n : lengths) {
            if (n < 16 || n > 1 << 20) {
                throw new UserInputException("--lengths must be in [16, 1048576], got " + n);
            }
        }
        if (headDim < 1 || repeats < 1) {
            throw new UserInputException("--head-dim and --repeats must be >= 1, got " + headDim + " and " + repeats);
        }
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        List<Row> rows = new ArrayList<>();
        for (int n : lengths) {
            for (String kind : List.of("flash", "linear", "stock")) {
                if (kind.equals("stock") && n > stockMax) {
                    continue;
                }
                Row r = run(kind, n);
                rows.add(r);
                log.printf(Locale.ROOT, "%-6s N=%-6d %s%n", kind, n, r.failure() != null ? "failed: " + r.failure()
                        : String.format(Locale.ROOT, "%.1f ms, peak %.0f MB (baseline %.0f MB)", r.medianMs(),
                        r.peakBytes() / 1e6, r.baselineBytes() / 1e6));
                log.flush();
            }
        }
        Files.createDirectories(out);
        StringBuilder csv = new StringBuilder("kind,n,head_dim,median_ms,baseline_bytes,peak_bytes,failure\n");
        for (Row r : rows) {
            csv.append(String.format(Locale.ROOT, "%s,%d,%d,%.1f,%d,%d,%s%n", r.kind(), r.n(), headDim, r.medianMs(),
                    r.baselineBytes(), r.peakBytes(), r.failure() == null ? "" : "\"" + r.failure()
                            .replace("\"", "'") + "\""));
        }
        Files.writeString(out.resolve(CSV), csv, StandardCharsets.UTF_8);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION, markdown(rows, machine,
                command.strip()));
        log.printf("wrote %s and the '%s' section of %s%n", out.resolve(CSV), SECTION,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    private Row run(String kind, int n) throws IOException, InterruptedException {
        List<String> lines = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(1, SameDiffBenchWorker.class.getName())
                .args(List.of(kind, Integer.toString(n), Integer.toString(headDim), Integer.toString(repeats)))
                .heap(heap).timeout(Duration.ofSeconds(limit)).output(lines::add, lines::add).build().run();
        for (String line : lines) {
            int at = line.indexOf(SameDiffBenchWorker.RESULT);
            if (at >= 0 && r.succeeded()) {
                String[] f = line.substring(at + SameDiffBenchWorker.RESULT.length()).split(",");
                return new Row(kind, n, Double.parseDouble(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]), null);
            }
        }
        String reason = r.timedOut() ? "no result within the " + limit + " s limit" : null;
        for (String line : lines) {
            int at = line.indexOf(SameDiffBenchWorker.FAILED);
            if (at >= 0) {
                String[] f = line.substring(at + SameDiffBenchWorker.FAILED.length()).split(",", 3);
                reason = f.length > 2 ? f[2] : line;
            }
        }
        if (reason == null) {
            reason = "process exited with code " + r.exitCode() + (lines.isEmpty() ? ""
                    : " (" + lines.get(lines.size() - 1).strip() + ")");
        }
        return new Row(kind, n, Double.NaN, 0, 0, reason);
    }

    private String markdown(List<Row> rows, MachineInfo m, String command) {
        StringBuilder b = new StringBuilder(MarkdownSection.opening("SameDiff: forward + backward through a graph",
                command, m, "One head, D = " + headDim + ", float32, causal, with q, k and v as graph variables; one "
                + "pass is `sd.calculateGradients` for q, k and v of `sum(O * g)`, and the time is the median of "
                + repeats + " passes. flash is `SDAttention.flash`, linear `SDAttention.linear` (decay 0.99), and "
                + "stock SameDiff's own `softmax(Q K^T / sqrt(D) + M) V` with an `[N, N]` causal mask. Each "
                + "configuration runs in its own JVM (heap " + heap + "); memory is the " + PeakMemory.measure()
                + ", above a baseline taken after the graph was built, before the first pass."));
        b.append("| function | N | median ms | baseline MB | peak MB | peak - baseline MB |\n"
                + "|---|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            if (r.failure() != null) {
                b.append(String.format(Locale.ROOT, "| %s | %d | failed: %s | | | |%n", r.kind(), r.n(),
                        r.failure()));
            } else {
                b.append(String.format(Locale.ROOT, "| %s | %d | %.1f | %.0f | %.0f | %.0f |%n", r.kind(), r.n(),
                        r.medianMs(), r.baselineBytes() / 1e6, r.peakBytes() / 1e6,
                        (r.peakBytes() - r.baselineBytes()) / 1e6));
            }
        }
        b.append("\nFor scale, an `N x N` float32 array is `4 N^2` bytes: ");
        for (int n : lengths) {
            b.append(String.format(Locale.ROOT, "%.0f MB at N = %d, ", 4.0 * n * n / 1e6, n));
        }
        b.setLength(b.length() - 2);
        b.append(".\n");
        int longest = lengths.stream().mapToInt(Integer::intValue).max().orElse(0);
        for (Row r : rows) {
            if (r.n() == longest && r.failure() == null && !r.kind().equals("stock")) {
                double nxn = 4.0 * longest * longest / 1e6;
                b.append(String.format(Locale.ROOT, "%nAt N = %d, %s's whole process peaks at %.0f MB, %s the %.0f MB "
                        + "of a single N x N float32 array.%n", longest, r.kind(), r.peakBytes() / 1e6,
                        r.peakBytes() / 1e6 < nxn ? "below" : "NOT below", nxn));
            }
        }
        return b.toString();
    }
}
