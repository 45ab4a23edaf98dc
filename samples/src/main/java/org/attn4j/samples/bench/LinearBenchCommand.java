package org.attn4j.samples.bench;

import java.awt.Color;
import java.io.IOException;
import java.io.PrintWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.Callable;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.samples.Options;
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

    @Option(names = "--warm-up", paramLabel = "SECONDS", defaultValue = "2",
            description = "How long each op (linear, then flash) runs untimed at the smallest N before anything is "
                    + "timed, so the JIT has compiled the Java tile and scan loops (default: ${DEFAULT-VALUE}).")
    double warmUpSeconds;

    @Option(names = "--rounds", paramLabel = "R", defaultValue = "15",
            description = "Interleaved rounds: each round times every linear attention variant at every N once, "
                    + "the N in a shuffled order; medians over rounds are reported. Fewer than 15 leave the "
                    + "flatness figure to the machine's noise on a shared 2-core VM (default: ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--window-tokens", paramLabel = "T", defaultValue = "0",
            description = "From N = " + FLAT_FROM_N + " up, each measurement times T/N back-to-back calls (at least "
                    + "one): the same number of tokens at every N, so every N meets the machine's slow spells "
                    + "alike; 0 means the largest N (default: ${DEFAULT-VALUE}).")
    long windowTokens;

    @Option(names = "--min-seconds", paramLabel = "S", defaultValue = "0.5",
            description = "Below N = " + FLAT_FROM_N + " and for flash attention, each measurement times "
                    + "back-to-back calls filling about S seconds (at least one, at most " + MAX_RUNS + ") "
                    + "(default: ${DEFAULT-VALUE}).")
    double minSeconds;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV, chart and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    private static final int HEAD_DIM = 64;
    /** Linear attention with its outputs in a reused workspace (rows of their own). */
    static final String WORKSPACE = "linear-ws";
    /**
     * The same on one thread: the op's scaling in N without the stalls of two threads sharing two cores with
     * everything else (a parallel phase waits for its slowest thread).
     */
    static final String ONE_THREAD = "linear-ws-1t";
    private static final WorkspaceConfiguration WS_CONFIG = WorkspaceConfiguration.builder().initialSize(0)
            .policyLearning(LearningPolicy.FIRST_LOOP).policyAllocation(AllocationPolicy.OVERALLOCATE)
            .overallocationLimit(0.1).policySpill(SpillPolicy.REALLOCATE).build();
    private static final int MAX_RUNS = 101;
    private static final String[] PASSES = {"fwd", "fwd+bwd"};
    /** Time per token is summarised from here up. */
    private static final int FLAT_FROM_N = 4096;
    /** Seed of the order of N within each round. */
    private static final long ORDER_SEED = 7;

    /**
     * One measured configuration: {@code impl} is "linear", {@value #WORKSPACE}, {@value #ONE_THREAD} or "flash",
     * {@code pass} "fwd" or "fwd+bwd"; {@code roundMs} the mean call of each round, {@code medianMs} their
     * median; {@code firstCallMs} each round's untimed first call.
     */
    record Row(int n, String impl, String pass, double medianMs, int callsPerRound, double[] roundMs,
               double[] firstCallMs, long peakIncreaseBytes, String note) {

        static Row failed(int n, String impl, String pass, Throwable e) {
            return new Row(n, impl, pass, Double.NaN, 0, new double[0], new double[0], -1, "failed: "
                    + e.getClass().getSimpleName() + ": "
                    + String.valueOf(e.getMessage()).strip().replaceAll("\\s*\\R\\s*", " "));
        }

        boolean ok() {
            return note.isEmpty();
        }

        double usPerToken() {
            return medianMs * 1000.0 / n;
        }
    }

    @Override
    public Integer call() throws IOException {
        Options.outputDirectory("--out", out);
        if (!(minSeconds >= 0) || Double.isInfinite(minSeconds)) {
            throw new UserInputException("--min-seconds must be finite and >= 0, got " + minSeconds);
        }
        if (windowTokens < 0) {
            throw new UserInputException("--window-tokens must be >= 0 (0: the largest N), got " + windowTokens);
        }
        if (minN < 1 || maxN < minN || rounds < 1) {
            throw new UserInputException("need 1 <= --min-n <= --max-n and --rounds >= 1, got " + minN + ", "
                    + maxN + ", " + rounds);
        }
        Options.atLeast("--warm-up", warmUpSeconds, 0);
        if (!(decay > 0 && decay <= 1)) {
            throw new UserInputException("--decay must be in (0, 1], got " + decay);
        }
        Files.createDirectories(out);
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        List<Integer> sizes = sizes();
        Map<Integer, INDArray[]> inputs = new LinkedHashMap<>();
        for (int n : sizes) {
            inputs.put(n, inputs(n));
        }
        warmUp();
        // Fresh outputs last: freeing a GB of fresh pages leaves kernel work (returning and zeroing pages) that
        // would otherwise land in the measurements after it.
        List<Row> rows = new ArrayList<>(linearRounds(log, sizes, inputs, new String[][] {{WORKSPACE, "fwd"},
            {ONE_THREAD, "fwd"}, {WORKSPACE, "fwd+bwd"}, {ONE_THREAD, "fwd+bwd"}}));
        for (int n : sizes) {
            rows.addAll(flashRounds(log, n, inputs.get(n)));
            // Flash runs until it is the slower one in both passes: from there on it only gets worse.
            if (!flashFaster(rows, n)) {
                break;
            }
        }
        rows.addAll(linearRounds(log, sizes, inputs, new String[][] {{"linear", "fwd"}, {"linear", "fwd+bwd"}}));
        for (INDArray[] in : inputs.values()) {
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

    /** N = {@link #minN}, doubling, up to {@link #maxN}. */
    private List<Integer> sizes() {
        List<Integer> sizes = new ArrayList<>();
        for (long n = minN; n <= maxN; n *= 2) {
            sizes.add((int) n);
        }
        return sizes;
    }

    /** The largest N measured ({@link #maxN} when it is {@link #minN} times a power of two). */
    private int largestN() {
        List<Integer> sizes = sizes();
        return sizes.get(sizes.size() - 1);
    }

    /** Whether flash was faster than linear attention (reused workspace) at N in at least one pass. */
    private static boolean flashFaster(List<Row> rows, int n) {
        for (String pass : PASSES) {
            Optional<Row> f = find(rows, n, "flash", pass);
            Optional<Row> l = find(rows, n, WORKSPACE, pass);
            if (f.isPresent() && l.isPresent() && f.get().ok() && l.get().ok()
                    && l.get().medianMs() > f.get().medianMs()) {
                return true;
            }
        }
        return false;
    }

    /** Each op for {@link #warmUpSeconds} at the smallest N, so the JIT has compiled the Java tile and scan loops. */
    private void warmUp() {
        INDArray[] in = inputs(minN);
        for (String impl : new String[] {"linear", "flash"}) {
            long end = System.nanoTime() + (long) (warmUpSeconds * 1e9);
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

    /**
     * Linear attention configurations ({impl, pass}) at every N, in {@link #rounds} interleaved rounds: round r
     * times every configuration at every N once, the N in an order shuffled anew each round (seeded), before
     * round r + 1 starts. From {@link #FLAT_FROM_N} up every measurement covers the same number of tokens
     * ({@link #windowTokens()}), so the shared machine's slow spells, which come and go within seconds, are as
     * likely to fall in a window at one N as at another, and the median over rounds sets aside the windows they
     * hit alike at every N. The first round also measures each configuration's peak memory, starting from a
     * collected heap.
     */
    private List<Row> linearRounds(PrintWriter log, List<Integer> sizes, Map<Integer, INDArray[]> inputs,
                                   String[][] configs) {
        Map<String, Sampled> sampled = new LinkedHashMap<>();
        Random order = new Random(ORDER_SEED);
        for (int round = 0; round < rounds; round++) {
            boolean first = round == 0;
            for (String[] c : configs) {
                List<Integer> shuffled = new ArrayList<>(sizes);
                Collections.shuffle(shuffled, order);
                for (int n : shuffled) {
                    sampled.computeIfAbsent(n + "/" + c[0] + "/" + c[1], k -> new Sampled(n))
                            .measure(() -> runOnce(c[0], c[1], inputs.get(n)), first);
                }
            }
            log.printf(Locale.ROOT, "round %d/%d of %s done%n", round + 1, rounds, configs[0][0]);
            log.flush();
        }
        List<Row> rows = new ArrayList<>();
        for (int n : sizes) {
            for (String[] c : configs) {
                rows.add(logged(log, sampled.get(n + "/" + c[0] + "/" + c[1]).row(n, c[0], c[1])));
            }
        }
        return rows;
    }

    /** Tokens in one measurement from {@link #FLAT_FROM_N} up: {@code --window-tokens}, or the largest N. */
    private long windowTokens() {
        return windowTokens > 0 ? windowTokens : largestN();
    }

    /** Flash attention at one N, both passes, in {@link #rounds} rounds alternating the passes. */
    private List<Row> flashRounds(PrintWriter log, int n, INDArray[] in) {
        Map<String, Sampled> sampled = new LinkedHashMap<>();
        for (int round = 0; round < rounds; round++) {
            for (String pass : PASSES) {
                sampled.computeIfAbsent(pass, k -> new Sampled(0)).measure(() -> runOnce("flash", pass, in),
                        round == 0);
            }
        }
        List<Row> rows = new ArrayList<>();
        for (String pass : PASSES) {
            rows.add(logged(log, sampled.get(pass).row(n, "flash", pass)));
        }
        return rows;
    }

    /** The samples of one configuration over the rounds. */
    private final class Sampled {
        private final List<Double> roundMs = new ArrayList<>();
        private final List<Double> firstCallMs = new ArrayList<>();
        /** The sequence length whose window is counted in tokens; 0 for a window counted in seconds. */
        private final int tokensOf;
        private int calls;
        private long peak = -1;
        private Throwable failure;

        /**
         * @param n the configuration's N when its windows hold {@link #windowTokens()} tokens (N at or above
         *          {@link #FLAT_FROM_N}), otherwise any N below that or 0: windows of about {@link #minSeconds}
         */
        Sampled(int n) {
            this.tokensOf = n >= FLAT_FROM_N ? n : 0;
        }

        /**
         * One round: one untimed call, then back-to-back calls as a training loop makes them, their mean (total
         * time over calls) joins the round values. The window holds {@link #windowTokens()} tokens from
         * {@link #FLAT_FROM_N} up, about {@link #minSeconds} below. The mean, not the median call: at N = 1M one
         * call is the whole window and absorbs every pause of the machine in it, so shorter calls must be charged
         * for theirs too; and the same tokens per window, not the same seconds, so that every N is exposed to
         * those pauses alike. Measured, reused workspace, fwd+bwd, two threads: windows of 1M tokens at every
         * N gave medians within 1.10 of each other from 4K to 1M (a harness, 15 rounds) and 1.11 (this bench, 21
         * rounds), where 0.5 s windows had given 1.28, and 1.48 as ratios to a 16K reference timed around each
         * (25 rounds). With {@code withPeak}, the first round also measures peak
         * memory. A failure is kept for the row and ends this configuration's rounds.
         */
        void measure(Runnable call, boolean withPeak) {
            if (failure != null) {
                return;
            }
            try {
                timeRound(call, withPeak);
            } catch (RuntimeException | OutOfMemoryError e) {
                failure = e;
            }
        }

        private void timeRound(Runnable call, boolean withPeak) {
            PeakMemory memory = null;
            if (withPeak && calls == 0) {
                PeakMemory.collectGarbage();
                memory = PeakMemory.start();
            }
            // Untimed for the mean: the first call after other work re-faults memory this VM took back
            // (virtio-balloon free page reporting); back-to-back calls, as in a training loop, do not. Kept apart.
            long t0 = System.nanoTime();
            call.run();
            double firstMs = (System.nanoTime() - t0) / 1e6;
            firstCallMs.add(firstMs);
            if (calls == 0) {
                calls = tokensOf > 0 ? (int) Math.max(1, windowTokens() / tokensOf)
                        : (int) Math.min(MAX_RUNS, Math.max(1, Math.ceil(minSeconds * 1000 / Math.max(firstMs, 1e-3))));
            }
            long t1 = System.nanoTime();
            for (int r = 0; r < calls; r++) {
                call.run();
            }
            double mean = (System.nanoTime() - t1) / 1e6 / calls;
            if (memory != null) {
                peak = memory.stop().increaseBytes();
            }
            roundMs.add(mean);
        }

        Row row(int n, String impl, String pass) {
            if (failure != null) {
                return Row.failed(n, impl, pass, failure);
            }
            double[] r = roundMs.stream().mapToDouble(Double::doubleValue).toArray();
            double[] f = firstCallMs.stream().mapToDouble(Double::doubleValue).toArray();
            return new Row(n, impl, pass, GemmRate.median(r), calls, r, f, peak, "");
        }
    }

    private void runOnce(String impl, String pass, INDArray[] in) {
        if (impl.equals(WORKSPACE) || impl.equals(ONE_THREAD)) {
            // Outputs and states come from an ND4J workspace that is reused call after call, as DL4J runs its
            // layers: no fresh pages to fault in (ND4J touches every page of a new array: ~0.1 ms per MB here).
            try (MemoryWorkspace ws = Nd4j.getWorkspaceManager().getAndActivateWorkspace(WS_CONFIG,
                    "attn4j-bench-linear-" + in[0].size(2))) {
                runLinear(impl.equals(ONE_THREAD) ? LinearAttention.withChunk(LinearAttention.DEFAULT_CHUNK, 1)
                        : LinearAttention.defaults(), pass, in);
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
            o.cache().release();
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

    private void runLinear(LinearAttention op, String pass, INDArray[] in) {
        LinearAttentionOutput o = op.forward(in[0], in[1], in[2], Decay.of(decay), true, null);
        if (pass.equals("fwd+bwd")) {
            op.backward(in[0], in[1], in[2], Decay.of(decay), true, null, in[3], null, o.cache());
        }
    }

    private static Row logged(PrintWriter log, Row r) {
        if (r.ok()) {
            log.printf(Locale.ROOT, "N=%-8d %-9s %-7s %10.1f ms  %7.3f us/token  peak +%.1f MB (%d round%s of %d "
                    + "call%s)%n", r.n(), r.impl(), r.pass(), r.medianMs(), r.usPerToken(), r.peakIncreaseBytes() / 1e6,
                    r.roundMs().length, r.roundMs().length == 1 ? "" : "s", r.callsPerRound(),
                    r.callsPerRound() == 1 ? "" : "s");
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
        StringBuilder b = new StringBuilder("n,impl,pass,median_ms,us_per_token,rounds,calls_per_round,round_mean_ms,"
                + "round_first_call_ms,peak_increase_bytes,note\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%d,%s,%s,%s,%s,%d,%d,%s,%s,%s,\"%s\"%n", r.n(), r.impl(),
                    r.pass(),
                    r.ok() ? String.format(Locale.ROOT, "%.3f", r.medianMs()) : "",
                    r.ok() ? String.format(Locale.ROOT, "%.4f", r.usPerToken()) : "", r.roundMs().length,
                    r.callsPerRound(), joined(r.roundMs(), "%.3f"), joined(r.firstCallMs(), "%.3f"),
                    r.peakIncreaseBytes() < 0 ? "" : Long.toString(r.peakIncreaseBytes()),
                    r.note().replace("\"", "'")));
        }
        Files.writeString(file, b, StandardCharsets.UTF_8);
    }

    private static String joined(double[] values, String format) {
        StringBuilder each = new StringBuilder();
        for (double v : values) {
            each.append(each.length() == 0 ? "" : " ").append(String.format(Locale.ROOT, format, v));
        }
        return each.toString();
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
        series(chart, rows, ONE_THREAD, "fwd", "linear fwd, reused workspace, one thread", new Color(0xff7f0e));
        series(chart, rows, ONE_THREAD, "fwd+bwd", "linear fwd+bwd, reused workspace, one thread",
                new Color(0x8c4a00));
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
        StringBuilder b = new StringBuilder(MarkdownSection.opening(
                "Linear attention (causal, with decay) vs flash attention", command, m, String.format(Locale.ROOT,
                        "Every configuration is B = 1, one head, D = %d, float32, causal, decay %s, chunk %d, after "
                        + "both ops ran for %s s. Linear attention is timed in %d interleaved rounds, each timing "
                        + "every variant at every N once in a shuffled order; one measurement is an untimed call "
                        + "followed by back-to-back calls that cover %d tokens from N = %d up (about %s s below), and "
                        + "the table gives the median over rounds, as time per call and per token. The variants: "
                        + "fresh outputs on every call, outputs in a reused workspace, and the workspace on one "
                        + "thread. Flash attention (causal, fresh outputs) is timed from the smallest N until it is "
                        + "slower than linear attention in both passes. Peak is the rise of the process's resident "
                        + "memory during a configuration's first round above its level with the inputs allocated, "
                        + "measured as the %s.", HEAD_DIM, decay, LinearAttention.DEFAULT_CHUNK,
                        BigDecimal.valueOf(warmUpSeconds).stripTrailingZeros().toPlainString(), rounds,
                        windowTokens(), FLAT_FROM_N, minSeconds, PeakMemory.measure())));
        b.append("| N | linear fwd | linear fwd+bwd | µs/token fwd / fwd+bwd | µs/token in a reused workspace "
                + "fwd / fwd+bwd | µs/token, reused workspace, one thread fwd / fwd+bwd | linear peak fwd / fwd+bwd "
                + "| flash fwd | flash fwd+bwd | flash peak fwd / fwd+bwd |\n");
        b.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int nn : sizes()) {
            Optional<Row> lf = find(rows, nn, "linear", "fwd");
            Optional<Row> lb = find(rows, nn, "linear", "fwd+bwd");
            b.append(String.format(Locale.ROOT, "| %d | %s | %s | %s / %s | %s / %s | %s / %s | %s / %s | %s | %s "
                    + "| %s / %s |%n", nn, time(lf), time(lb), perToken(lf), perToken(lb),
                    perToken(find(rows, nn, WORKSPACE, "fwd")), perToken(find(rows, nn, WORKSPACE, "fwd+bwd")),
                    perToken(find(rows, nn, ONE_THREAD, "fwd")), perToken(find(rows, nn, ONE_THREAD, "fwd+bwd")),
                    mb(lf), mb(lb),
                    time(find(rows, nn, "flash", "fwd")), time(find(rows, nn, "flash", "fwd+bwd")),
                    mb(find(rows, nn, "flash", "fwd")), mb(find(rows, nn, "flash", "fwd+bwd"))));
        }
        b.append('\n').append(summary(rows));
        b.append("\n![time per token against N](").append(PNG).append(")\n\nEvery row: [").append(CSV).append("](")
                .append(CSV).append(").\n");
        return b.toString();
    }

    /** The targets: flatness of time per token from 4K up, memory growth, and the crossover with flash. */
    private String summary(List<Row> rows) {
        StringBuilder b = new StringBuilder();
        for (String impl : new String[] {"linear", WORKSPACE, ONE_THREAD}) {
            flatness(b, rows, impl);
        }
        // Per token, so linear memory shows as a flat line; small N sit near the resolution of the measure
        // (freed blocks are reused without new resident pages).
        List<Row> peaks = rows.stream().filter(r -> r.ok() && r.impl().equals("linear") && r.pass().equals("fwd+bwd")
                && r.n() >= FLAT_FROM_N && r.peakIncreaseBytes() >= 0).toList();
        if (!peaks.isEmpty()) {
            b.append(String.format(Locale.ROOT, "- Peak memory rise per token, linear fwd+bwd with fresh outputs "
                    + "(O, dQ, dK, dV alone: %.2f KB per token):", 4.0 * HEAD_DIM * Float.BYTES / 1024));
            for (Row r : peaks) {
                b.append(String.format(Locale.ROOT, " %s %.2f KB%s", label(Math.log(r.n()) / Math.log(2)),
                        r.peakIncreaseBytes() / 1024.0 / r.n(), r == peaks.get(peaks.size() - 1) ? ".\n" : ","));
            }
        }
        for (String pass : new String[] {"fwd", "fwd+bwd"}) {
            String cross = "flash was never the slower one in the N measured";
            for (int n : sizes()) {
                Optional<Row> f = find(rows, n, "flash", pass);
                Optional<Row> l = find(rows, n, "linear", pass);
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

    /**
     * Appends the range of time per token from {@link #FLAT_FROM_N} up (medians over rounds) for one variant,
     * forward and forward+backward: how flat linear attention's cost per token stays as N grows.
     */
    private void flatness(StringBuilder b, List<Row> rows, String impl) {
        StringBuilder passes = new StringBuilder();
        for (String pass : PASSES) {
            List<Row> mine = rows.stream().filter(r -> r.ok() && r.impl().equals(impl) && r.pass().equals(pass)
                    && r.n() >= FLAT_FROM_N).toList();
            if (mine.size() < 2) {
                continue;
            }
            double lo = mine.stream().mapToDouble(Row::usPerToken).min().orElseThrow();
            double hi = mine.stream().mapToDouble(Row::usPerToken).max().orElseThrow();
            passes.append(String.format(Locale.ROOT, "%s%s %.3f to %.3f µs (largest / smallest %.2f)",
                    passes.length() == 0 ? "" : ", ", pass.equals("fwd") ? "forward" : "forward+backward", lo, hi,
                    hi / lo));
        }
        if (passes.length() > 0) {
            String what = switch (impl) {
                case WORKSPACE -> "reused workspace";
                case ONE_THREAD -> "reused workspace, one thread";
                default -> "fresh outputs";
            };
            b.append(String.format(Locale.ROOT, "- Time per token from N = %d to %d, %s: %s.%n", FLAT_FROM_N,
                    largestN(), what, passes));
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
