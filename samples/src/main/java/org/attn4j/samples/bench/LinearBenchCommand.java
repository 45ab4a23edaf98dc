package org.attn4j.samples.bench;

import java.awt.Color;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Callable;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.metrics.PeakMemory;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.memory.conf.WorkspaceConfiguration;
import org.nd4j.linalg.api.memory.enums.AllocationPolicy;
import org.nd4j.linalg.api.memory.enums.LearningPolicy;
import org.nd4j.linalg.api.memory.enums.SpillPolicy;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench linear}: time per token and peak memory of causal linear attention with decay, forward
 * and forward+backward, over N = 1K, 2K, ..., {@code --max-n} (B = 1, one head, D = 64, float32), beside causal
 * flash attention at the same N until flash is the slower of the two in both passes. Writes
 * {@code bench-linear.csv}, {@code bench-linear.png} and the {@code linear} section of {@code benchmarks.md}.
 */
@Command(name = "linear", mixinStandardHelpOptions = true,
        description = {"Time causal linear attention (and flash attention until it is slower) against N.",
            "Writes OUT/bench-linear.csv, OUT/bench-linear.png and a section of OUT/benchmarks.md."})
public final class LinearBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-linear.csv";
    static final String PNG = "bench-linear.png";
    static final String SECTION = "linear";

    @Option(names = "--max-n", paramLabel = "N", defaultValue = "1048576",
            description = "Largest sequence length (default: ${DEFAULT-VALUE}).")
    int maxN;

    @Option(names = "--min-n", paramLabel = "N", defaultValue = "256",
            description = "Smallest sequence length; N doubles from here (default: ${DEFAULT-VALUE}).")
    int minN;

    @Option(names = "--decay", paramLabel = "L", defaultValue = "0.99",
            description = "Decay rate lambda (default: ${DEFAULT-VALUE}).")
    double decay;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "5",
            description = "Timed runs (median) per configuration at least; more up to N = 65536, see "
                    + "--min-seconds (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--min-seconds", paramLabel = "S", defaultValue = "1",
            description = "Up to N = 65536, repeat a configuration until its timed runs fill about S seconds (at "
                    + "most " + MAX_RUNS + " runs), so short runs get enough samples for a stable median (default: "
                    + "${DEFAULT-VALUE}).")
    double minSeconds;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "docs",
            description = "Directory for the CSV, chart and benchmarks.md (default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    private static final int HEAD_DIM = 64;
    /** Linear attention with its outputs in a reused workspace (rows of their own). */
    static final String WORKSPACE = "linear-ws";
    private static final WorkspaceConfiguration WS_CONFIG = WorkspaceConfiguration.builder().initialSize(0)
            .policyLearning(LearningPolicy.FIRST_LOOP).policyAllocation(AllocationPolicy.OVERALLOCATE)
            .overallocationLimit(0.1).policySpill(SpillPolicy.REALLOCATE).build();
    private static final int REPEAT_MAX_N = 65536;
    private static final int MAX_RUNS = 101;
    /** The flat-time target is judged from here up (the issue: "from 4K to 1M"). */
    private static final int FLAT_FROM_N = 4096;

    /** One measured configuration: {@code impl} is "linear" or "flash", {@code pass} "fwd" or "fwd+bwd". */
    record Row(int n, String impl, String pass, double medianMs, int repeats, long peakIncreaseBytes, String note) {
        boolean ok() {
            return note.isEmpty();
        }

        double usPerToken() {
            return medianMs * 1000.0 / n;
        }
    }

    @Override
    public Integer call() throws IOException {
        if (!(minSeconds >= 0) || Double.isInfinite(minSeconds)) {
            throw new UserInputException("--min-seconds must be finite and >= 0, got " + minSeconds);
        }
        if (minN < 1 || maxN < minN || repeats < 1) {
            throw new UserInputException("need 1 <= --min-n <= --max-n and --repeats >= 1, got " + minN + ", "
                    + maxN + ", " + repeats);
        }
        if (!(decay > 0 && decay <= 1)) {
            throw new UserInputException("--decay must be in (0, 1], got " + decay);
        }
        Files.createDirectories(out);
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        List<Row> rows = new ArrayList<>();
        warmUp();
        boolean flashStillFaster = true;
        for (long n = minN; n <= maxN; n *= 2) {
            INDArray[] in = inputs((int) n);
            for (String pass : new String[] {"fwd", "fwd+bwd"}) {
                rows.add(logged(log, measure((int) n, "linear", pass, in)));
                rows.add(logged(log, measure((int) n, WORKSPACE, pass, in)));
            }
            if (flashStillFaster) {
                for (String pass : new String[] {"fwd", "fwd+bwd"}) {
                    rows.add(logged(log, measure((int) n, "flash", pass, in)));
                }
                // Flash runs until it is the slower one in both passes: from there on it only gets worse.
                flashStillFaster = slower("linear", rows, (int) n);
            }
            for (INDArray a : in) {
                a.close();
            }
        }
        writeCsv(out.resolve(CSV), rows);
        writeChart(out.resolve(PNG), rows);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION,
                markdown(rows, machine, command.strip()));
        log.printf("wrote %s, %s and the '%s' section of %s%n", out.resolve(CSV), out.resolve(PNG), SECTION,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    /** Whether {@code impl} was slower than the other at N in at least one pass. */
    private static boolean slower(String impl, List<Row> rows, int n) {
        for (String pass : new String[] {"fwd", "fwd+bwd"}) {
            Optional<Row> a = find(rows, n, impl, pass);
            Optional<Row> b = find(rows, n, impl.equals("linear") ? "flash" : "linear", pass);
            if (a.isPresent() && b.isPresent() && a.get().ok() && b.get().ok()
                    && a.get().medianMs() > b.get().medianMs()) {
                return true;
            }
        }
        return false;
    }

    /** Two seconds of each op at the smallest N, so the JIT has compiled the Java tile and scan loops. */
    private void warmUp() {
        INDArray[] in = inputs(minN);
        for (String impl : new String[] {"linear", "flash"}) {
            long end = System.nanoTime() + 2_000_000_000L;
            while (System.nanoTime() < end) {
                runOnce(impl, "fwd+bwd", in);
            }
        }
    }

    private static INDArray[] inputs(int n) {
        INDArray[] a = new INDArray[4];
        for (int i = 0; i < a.length; i++) {
            a[i] = Nd4j.getRandomFactory().getNewRandomInstance(100 + i).nextGaussian(new long[] {1, 1, n, HEAD_DIM})
                    .castTo(DataType.FLOAT).muli(0.125);
        }
        return a;
    }

    private Row measure(int n, String impl, String pass, INDArray[] in) {
        int runs = repeats;
        try {
            PeakMemory.collectGarbage();
            PeakMemory memory = PeakMemory.start();
            // Back-to-back calls after one untimed call, as a training loop makes them: a GC and a pause
            // before every call would add a cold start (parked threads, cold caches) of a few ms to each,
            // which swamps the small N.
            long first = System.nanoTime();
            runOnce(impl, pass, in);
            double firstMs = (System.nanoTime() - first) / 1e6;
            if (n <= REPEAT_MAX_N) {
                // A 5 ms call timed 5 times is at the mercy of one scheduling hiccup on a shared 2-core machine.
                runs = (int) Math.min(MAX_RUNS, Math.max(runs, Math.ceil(minSeconds * 1000 / Math.max(firstMs,
                        1e-3))));
            }
            double[] ms = new double[runs];
            for (int r = 0; r < runs; r++) {
                long t0 = System.nanoTime();
                runOnce(impl, pass, in);
                ms[r] = (System.nanoTime() - t0) / 1e6;
            }
            return new Row(n, impl, pass, GemmRate.median(ms), runs, memory.stop().increaseBytes(), "");
        } catch (RuntimeException | OutOfMemoryError e) {
            return new Row(n, impl, pass, Double.NaN, 0, -1, "failed: " + e.getClass().getSimpleName() + ": "
                    + String.valueOf(e.getMessage()).strip().replaceAll("\\s*\\R\\s*", " "));
        }
    }

    private void runOnce(String impl, String pass, INDArray[] in) {
        if (impl.equals(WORKSPACE)) {
            // Outputs and states come from an ND4J workspace that is reused call after call, as DL4J runs its
            // layers: no fresh pages to fault in (ND4J touches every page of a new array: ~0.1 ms per MB here).
            try (MemoryWorkspace ws = Nd4j.getWorkspaceManager().getAndActivateWorkspace(WS_CONFIG,
                    "attn4j-bench-linear-" + in[0].size(2))) {
                runLinear(pass, in);
            }
            return;
        }
        boolean backward = pass.equals("fwd+bwd");
        List<INDArray> made = new ArrayList<>();
        if (impl.equals("linear")) {
            LinearAttention op = LinearAttention.defaults();
            LinearAttentionOutput o = op.forward(in[0], in[1], in[2], Decay.of(decay), true, null);
            made.add(o.output());
            made.add(o.kvOut());
            if (backward) {
                LinearAttentionGradients g = op.backward(in[0], in[1], in[2], Decay.of(decay), true, null, in[3],
                        null, o.cache());
                made.addAll(List.of(g.dq(), g.dk(), g.dv(), g.dKvIn()));
            }
        } else {
            FlashAttention op = FlashAttention.defaults();
            AttentionOutput o = op.forward(in[0], in[1], in[2], AttentionMask.causal());
            made.add(o.output());
            made.add(o.lse());
            if (backward) {
                AttentionGradients g = op.backward(in[0], in[1], in[2], o.output(), o.lse(), in[3],
                        AttentionMask.causal(), FlashAttention.defaultScale(HEAD_DIM));
                made.addAll(List.of(g.dq(), g.dk(), g.dv()));
            }
        }
        for (INDArray a : made) {
            a.close();
        }
    }

    private void runLinear(String pass, INDArray[] in) {
        LinearAttention op = LinearAttention.defaults();
        LinearAttentionOutput o = op.forward(in[0], in[1], in[2], Decay.of(decay), true, null);
        if (pass.equals("fwd+bwd")) {
            op.backward(in[0], in[1], in[2], Decay.of(decay), true, null, in[3], null, o.cache());
        }
    }

    private static Row logged(PrintWriter log, Row r) {
        if (r.ok()) {
            log.printf(Locale.ROOT, "N=%-8d %-6s %-7s %10.1f ms  %7.3f us/token  peak +%.1f MB (%d run%s)%n", r.n(),
                    r.impl(), r.pass(), r.medianMs(), r.usPerToken(), r.peakIncreaseBytes() / 1e6, r.repeats(),
                    r.repeats() == 1 ? "" : "s");
        } else {
            log.printf(Locale.ROOT, "N=%-8d %-6s %-7s %s%n", r.n(), r.impl(), r.pass(), r.note());
        }
        log.flush();
        return r;
    }

    private static Optional<Row> find(List<Row> rows, int n, String impl, String pass) {
        return rows.stream().filter(r -> r.n() == n && r.impl().equals(impl) && r.pass().equals(pass)).findFirst();
    }

    private static void writeCsv(Path file, List<Row> rows) throws IOException {
        StringBuilder b = new StringBuilder("n,impl,pass,median_ms,us_per_token,repeats,peak_increase_bytes,note\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%d,%s,%s,%s,%s,%d,%s,\"%s\"%n", r.n(), r.impl(), r.pass(),
                    r.ok() ? String.format(Locale.ROOT, "%.3f", r.medianMs()) : "",
                    r.ok() ? String.format(Locale.ROOT, "%.4f", r.usPerToken()) : "", r.repeats(),
                    r.peakIncreaseBytes() < 0 ? "" : Long.toString(r.peakIncreaseBytes()),
                    r.note().replace("\"", "'")));
        }
        Files.writeString(file, b, StandardCharsets.UTF_8);
    }

    private static void writeChart(Path file, List<Row> rows) throws IOException {
        XYChart chart = new XYChartBuilder().width(1000).height(650)
                .title("Causal attention: time per token vs N (B=1, one head, D=64, float32)")
                .xAxisTitle("sequence length N (log scale)").yAxisTitle("microseconds per token").build();
        chart.getStyler().setYAxisLogarithmic(true);
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
        chart.setCustomXAxisTickLabelsFormatter(LinearBenchCommand::label);
        series(chart, rows, "linear", "fwd", "linear fwd", new Color(0x1f77b4));
        series(chart, rows, "linear", "fwd+bwd", "linear fwd+bwd", new Color(0x08306b));
        series(chart, rows, WORKSPACE, "fwd", "linear fwd, reused workspace", new Color(0x2ca02c));
        series(chart, rows, WORKSPACE, "fwd+bwd", "linear fwd+bwd, reused workspace", new Color(0x00441b));
        series(chart, rows, "flash", "fwd", "flash fwd", new Color(0xd62728));
        series(chart, rows, "flash", "fwd+bwd", "flash fwd+bwd", new Color(0x67000d));
        String path = file.toString();
        BitmapEncoder.saveBitmap(chart, path.substring(0, path.length() - 4), BitmapEncoder.BitmapFormat.PNG);
    }

    private static void series(XYChart chart, List<Row> rows, String impl, String pass, String name, Color color) {
        List<Double> x = new ArrayList<>();
        List<Double> y = new ArrayList<>();
        for (Row r : rows) {
            if (r.ok() && r.impl().equals(impl) && r.pass().equals(pass)) {
                x.add(Math.log(r.n()) / Math.log(2));
                y.add(Math.max(r.usPerToken(), 1e-3));
            }
        }
        if (!x.isEmpty()) {
            XYSeries s = chart.addSeries(name, x, y);
            s.setLineColor(color);
            s.setMarkerColor(color);
            s.setMarker(pass.equals("fwd") ? SeriesMarkers.CIRCLE : SeriesMarkers.DIAMOND);
        }
    }

    private static String label(double log2) {
        if (Math.abs(log2 - Math.rint(log2)) > 1e-9) {
            return "";
        }
        long n = 1L << Math.round(log2);
        return n >= 1 << 20 ? n / (1 << 20) + "M" : n >= 1024 ? n / 1024 + "K" : Long.toString(n);
    }

    private String markdown(List<Row> rows, MachineInfo m, String command) {
        StringBuilder b = new StringBuilder("## Linear attention (causal, with decay) vs flash attention\n\n");
        b.append(String.format(Locale.ROOT, "`%s`, %s, on %d cores (%s), OMP_NUM_THREADS=%s, Java %s, ND4J %s.%n%n",
                command, m.date(), m.cores(), m.cpuModel(), m.ompNumThreads(), m.javaVersion(), m.nd4jVersion()));
        b.append(String.format(Locale.ROOT, "- Setup: B = 1, one head, D = %d, float32, causal, lambda = %s, "
                + "chunk %d. Time: median of back-to-back runs after one untimed run: up to N = %d at least %d "
                + "and as many as fill about %s s (at most %d; the count is in the CSV), beyond it %d; both ops "
                + "ran for 2 s first (JIT warm-up). Flash attention (causal) runs beside it until it is the "
                + "slower one in both passes.%n",
                HEAD_DIM, decay, LinearAttention.DEFAULT_CHUNK, REPEAT_MAX_N, repeats, minSeconds, MAX_RUNS,
                repeats));
        b.append("- Peak: rise of the process's resident memory during a configuration's runs above its size "
                + "just before them, inputs already allocated (" + PeakMemory.measure() + ").\n");
        b.append(summary(rows)).append('\n');
        b.append("| N | linear fwd | linear fwd+bwd | µs/token fwd / fwd+bwd | µs/token in a reused workspace "
                + "fwd / fwd+bwd | linear peak fwd / fwd+bwd | flash fwd | flash fwd+bwd "
                + "| flash peak fwd / fwd+bwd |\n");
        b.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (long n = minN; n <= maxN; n *= 2) {
            int nn = (int) n;
            Optional<Row> lf = find(rows, nn, "linear", "fwd");
            Optional<Row> lb = find(rows, nn, "linear", "fwd+bwd");
            b.append(String.format(Locale.ROOT, "| %d | %s | %s | %s / %s | %s / %s | %s / %s | %s | %s | %s / %s |%n",
                    nn, time(lf), time(lb), perToken(lf), perToken(lb), perToken(find(rows, nn, WORKSPACE, "fwd")),
                    perToken(find(rows, nn, WORKSPACE, "fwd+bwd")), mb(lf), mb(lb),
                    time(find(rows, nn, "flash", "fwd")), time(find(rows, nn, "flash", "fwd+bwd")),
                    mb(find(rows, nn, "flash", "fwd")), mb(find(rows, nn, "flash", "fwd+bwd"))));
        }
        b.append("\n![time per token against N](").append(PNG).append(")\n\nEvery row: [").append(CSV).append("](")
                .append(CSV).append(").\n");
        return b.toString();
    }

    /** The targets: flatness of time per token from 4K up, memory growth, and the crossover with flash. */
    private String summary(List<Row> rows) {
        StringBuilder b = new StringBuilder();
        for (String impl : new String[] {"linear", WORKSPACE}) {
            for (String pass : new String[] {"fwd", "fwd+bwd"}) {
                flatness(b, rows, impl, pass);
            }
        }
        Optional<Row> small = find(rows, FLAT_FROM_N, "linear", "fwd+bwd");
        Optional<Row> big = find(rows, maxN, "linear", "fwd+bwd");
        if (small.isPresent() && big.isPresent() && small.get().ok() && big.get().ok()
                && small.get().peakIncreaseBytes() > 0) {
            b.append(String.format(Locale.ROOT, "- Peak memory, linear fwd+bwd: %.1f MB at N = %d, %.1f MB at N = %d "
                            + "(x%.1f for x%d tokens).%n", small.get().peakIncreaseBytes() / 1e6, FLAT_FROM_N,
                    big.get().peakIncreaseBytes() / 1e6, maxN,
                    big.get().peakIncreaseBytes() / (double) small.get().peakIncreaseBytes(), maxN / FLAT_FROM_N));
        }
        for (String pass : new String[] {"fwd", "fwd+bwd"}) {
            String cross = "flash was never the slower one in the N measured";
            for (long n = minN; n <= maxN; n *= 2) {
                Optional<Row> f = find(rows, (int) n, "flash", pass);
                Optional<Row> l = find(rows, (int) n, "linear", pass);
                if (f.isPresent() && l.isPresent() && f.get().ok() && l.get().ok()
                        && f.get().medianMs() > l.get().medianMs()) {
                    cross = (n == minN ? "at or below N = " : "between N = " + n / 2 + " and ") + n
                            + " (linear faster from N = " + n + ")";
                    break;
                }
            }
            b.append("- Crossover with flash attention, ").append(pass).append(": ").append(cross).append(".\n");
        }
        return b.toString();
    }

    /** Appends the spread of time per token from {@link #FLAT_FROM_N} up, for one implementation and pass. */
    private void flatness(StringBuilder b, List<Row> rows, String impl, String pass) {
        double lo = Double.MAX_VALUE;
        double hi = 0;
        int count = 0;
        for (Row r : rows) {
            if (r.ok() && r.impl().equals(impl) && r.pass().equals(pass) && r.n() >= FLAT_FROM_N) {
                lo = Math.min(lo, r.usPerToken());
                hi = Math.max(hi, r.usPerToken());
                count++;
            }
        }
        if (count > 1) {
            String what = impl.equals(WORKSPACE) ? "linear (outputs in a reused workspace)" : "linear (fresh outputs)";
            b.append(String.format(Locale.ROOT, "- Time per token, %s %s, N = %d to %d: %.3f to %.3f µs, max/min = "
                    + "%.2f (target: within 1.15).%n", what, pass, FLAT_FROM_N, maxN, lo, hi, hi / lo));
        }
    }

    private static String time(Optional<Row> r) {
        if (r.isEmpty()) {
            return "";
        }
        if (!r.get().ok()) {
            return r.get().note();
        }
        double ms = r.get().medianMs();
        return ms >= 1000 ? String.format(Locale.ROOT, "%.2f s", ms / 1000)
                : String.format(Locale.ROOT, ms >= 10 ? "%.0f ms" : "%.2f ms", ms);
    }

    private static String perToken(Optional<Row> r) {
        return r.isPresent() && r.get().ok() ? String.format(Locale.ROOT, "%.3f", r.get().usPerToken()) : "";
    }

    private static String mb(Optional<Row> r) {
        return r.isPresent() && r.get().ok() && r.get().peakIncreaseBytes() >= 0
                ? String.format(Locale.ROOT, "%.0f MB", r.get().peakIncreaseBytes() / 1e6) : "";
    }
}
