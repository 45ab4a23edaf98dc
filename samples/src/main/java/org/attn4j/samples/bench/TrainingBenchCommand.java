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
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench training}: training tokens per second of the GPT-like model with attn4j's flash attention,
 * its linear attention and DL4J's stock {@code SelfAttentionLayer}, at growing sequence lengths, each
 * configuration in its own process with a time limit, until a layer fails (the failure is recorded as it
 * happened: an exception, a non-finite loss, the time limit). Writes {@code bench-training.csv},
 * {@code bench-training.png} and the {@code training} section of {@code benchmarks.md}.
 */
@Command(name = "training", mixinStandardHelpOptions = true,
        description = {"Training tokens/s of the GPT-like model with flash, linear and DL4J's stock attention at",
            "growing N, until a layer fails. Writes OUT/bench-training.csv, .png and a section of benchmarks.md."})
public final class TrainingBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-training.csv";
    static final String PNG = "bench-training.png";
    static final String SECTION = "training";
    private static final String[] KINDS = {"flash", "linear", "stock"};

    @Option(names = "--min-n", paramLabel = "N", defaultValue = "256",
            description = "Shortest N (default: ${DEFAULT-VALUE}).")
    int minN;

    @Option(names = "--max-n", paramLabel = "N", defaultValue = "8192",
            description = "Longest N (default: ${DEFAULT-VALUE}).")
    int maxN;

    @Option(names = "--tokens", paramLabel = "TOKENS", defaultValue = "8192",
            description = "Tokens per step: batch = max(1, tokens / N) (default: ${DEFAULT-VALUE}).")
    int tokens;

    @Option(names = "--steps", paramLabel = "STEPS", defaultValue = "3",
            description = "Timed steps (default: ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--limit", paramLabel = "S", defaultValue = "300",
            description = "Seconds one configuration may take (default: ${DEFAULT-VALUE}).")
    int limit;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "8g",
            description = "Heap per process (default: ${DEFAULT-VALUE}).")
    String heap;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV, chart and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    /** One configuration: tokens/s and peak bytes, or why it failed. */
    record Row(String kind, int n, int batch, double tokensPerSecond, long peakBytes, String failure) {
    }

    @Override
    public Integer call() throws IOException, InterruptedException {
        Options.heap("--heap", heap);
        Options.outputDirectory("--out", out);
        if (minN < 8 || maxN < minN || tokens < 1 || steps < 1 || limit < 1) {
            throw new UserInputException("need 8 <= --min-n <= --max-n and positive --tokens, --steps, --limit");
        }
        Files.createDirectories(out);
        MachineInfo machine = MachineInfo.current();
        List<Row> rows = new ArrayList<>();
        PrintWriter log = spec.commandLine().getOut();
        for (String kind : KINDS) {
            for (int n = minN; n <= maxN; n *= 2) {
                Row r = run(kind, n, Math.max(1, tokens / n));
                rows.add(r);
                log.printf(Locale.ROOT, "%s N=%d: %s%n", kind, n, r.failure() == null
                        ? String.format(Locale.ROOT, "%.0f tokens/s", r.tokensPerSecond()) : "failed: " + r.failure());
                log.flush();
                if (r.failure() != null) {
                    break;                                    // longer sequences will not do better
                }
            }
        }
        StringBuilder csv = new StringBuilder("attention,n,batch,tokens_per_second,peak_bytes,failure\n");
        for (Row r : rows) {
            csv.append(String.format(Locale.ROOT, "%s,%d,%d,%.1f,%d,%s%n", r.kind(), r.n(), r.batch(),
                    r.tokensPerSecond(), r.peakBytes(), r.failure() == null ? "" : "\"" + r.failure()
                            .replace("\"", "'") + "\""));
        }
        Files.writeString(out.resolve(CSV), csv, StandardCharsets.UTF_8);
        chart(rows);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION, markdown(rows, machine,
                command.strip()));
        log.printf("wrote %s, %s and the '%s' section of %s%n", out.resolve(CSV), out.resolve(PNG), SECTION,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    private Row run(String kind, int n, int batch) throws IOException, InterruptedException {
        List<String> lines = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(1, TrainingBenchWorker.class.getName())
                .args(List.of(kind, Integer.toString(n), Integer.toString(batch), Integer.toString(steps)))
                .heap(heap).timeout(Duration.ofSeconds(limit)).output(lines::add, lines::add).build().run();
        for (String line : lines) {
            int at = line.indexOf(TrainingBenchWorker.RESULT);
            if (at >= 0 && r.succeeded()) {
                String[] f = line.substring(at + TrainingBenchWorker.RESULT.length()).split(",");
                return new Row(kind, n, batch, Double.parseDouble(f[3]), Long.parseLong(f[4]), null);
            }
        }
        String reason = r.timedOut() ? "no result within the " + limit + " s limit" : null;
        for (String line : lines) {
            int at = line.indexOf(TrainingBenchWorker.FAILED);
            if (at >= 0) {
                String[] f = line.substring(at + TrainingBenchWorker.FAILED.length()).split(",", 3);
                reason = f.length > 2 ? f[2] : line;
            }
        }
        if (reason == null) {
            reason = "process exited with code " + r.exitCode() + (lines.isEmpty() ? ""
                    : " (" + lines.get(lines.size() - 1).strip() + ")");
        }
        return new Row(kind, n, batch, Double.NaN, 0, reason);
    }

    private void chart(List<Row> rows) throws IOException {
        XYChart chart = new XYChartBuilder().width(900).height(550)
                .title("Training tokens/s, GPT-like model (d 64, 2 blocks, 4 heads), float32")
                .xAxisTitle("N (log scale)").yAxisTitle("tokens per second").build();
        chart.getStyler().setChartBackgroundColor(java.awt.Color.WHITE);
        for (String kind : KINDS) {
            List<Double> x = new ArrayList<>();
            List<Double> y = new ArrayList<>();
            for (Row r : rows) {
                if (r.kind().equals(kind) && r.failure() == null) {
                    x.add(Math.log(r.n()) / Math.log(2));
                    y.add(r.tokensPerSecond());
                }
            }
            if (!x.isEmpty()) {
                XYSeries s = chart.addSeries(kind, x, y);
                s.setMarker(SeriesMarkers.CIRCLE);
            }
        }
        chart.setCustomXAxisTickLabelsFormatter(v -> Math.abs(v - Math.rint(v)) > 1e-9 ? ""
                : Long.toString(1L << Math.round(v)));
        String path = out.resolve(PNG).toString();
        BitmapEncoder.saveBitmap(chart, path.substring(0, path.length() - 4), BitmapEncoder.BitmapFormat.PNG);
    }

    private String markdown(List<Row> rows, MachineInfo m, String command) {
        StringBuilder b = new StringBuilder(MarkdownSection.opening("Training: flash vs linear vs DL4J's stock "
                + "attention", command, m, "The GPT-like model of `attn4j train` (width 64, 2 pre-norm blocks, 4 "
                + "heads, vocabulary 256, float32, Adam) trains on random bytes with batch max(1, " + tokens
                + " / N): two untimed steps, then " + steps + " timed ones, each configuration in its own JVM (heap "
                + heap + ", limit " + limit + " s) so a failing layer takes only its own process down; peak is the "
                + "process's peak resident size over the steps. Stock is DL4J's `SelfAttentionLayer`, a SameDiff "
                + "layer that builds the whole N x N scores and has no causal mask (DL4J 1.0.0-M2.1 also doubles its "
                + "gradients, so its training is not the same computation)."));
        b.append("| attention | N | batch | tokens/s | peak | |\n|---|---:|---:|---:|---:|---|\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "| %s | %d | %d | %s | %s | %s |%n", r.kind(), r.n(), r.batch(),
                    r.failure() == null ? String.format(Locale.ROOT, "%.0f", r.tokensPerSecond()) : "",
                    r.failure() == null ? String.format(Locale.ROOT, "%.0f MB", r.peakBytes() / 1e6) : "",
                    r.failure() == null ? "" : "failed: " + r.failure()));
        }
        b.append("\n![training](").append(PNG).append(")\n");
        return b.toString();
    }
}
