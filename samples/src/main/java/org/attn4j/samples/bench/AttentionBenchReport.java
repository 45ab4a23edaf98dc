package org.attn4j.samples.bench;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.bench.BenchResult.Impl;
import org.attn4j.samples.bench.BenchResult.Pass;
import org.attn4j.samples.bench.BenchResult.Status;
import org.knowm.xchart.BitmapEncoder;
import org.nd4j.linalg.api.buffer.DataType;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * Writes the attention benchmark's results: {@code bench-attention.csv} (one row per configuration),
 * {@code bench-attention.png} (log-log time against N) and the {@code attention} section of
 * {@code benchmarks.md}.
 */
final class AttentionBenchReport {

    static final String CSV = "bench-attention.csv";
    static final String PNG = "bench-attention.png";
    static final String MARKDOWN = "benchmarks.md";
    static final String SECTION = "attention";

    /** "" for B = H = 1, else "-b1-h8": runs of other shapes keep their own files and section. */
    static String suffix(AttentionBench.Settings s) {
        String shape = s.batch() == 1 && s.heads() == 1 ? "" : "-b" + s.batch() + "-h" + s.heads();
        return shape + (s.dataType() == DataType.DOUBLE ? "-f64" : "") + (s.portable() ? "-portable" : "");
    }

    /** "float32" or "float64". */
    static String typeName(AttentionBench.Settings s) {
        return s.dataType() == DataType.DOUBLE ? "float64" : "float32";
    }

    static String csv(AttentionBench.Settings s) {
        return "bench-attention" + suffix(s) + ".csv";
    }

    static String png(AttentionBench.Settings s) {
        return "bench-attention" + suffix(s) + ".png";
    }

    static String section(AttentionBench.Settings s) {
        return SECTION + suffix(s);
    }

    /** "B = 1, one head" or "B = 1, H = 8". */
    private static String shape(AttentionBench.Settings s) {
        return "B = " + s.batch() + ", " + (s.heads() == 1 ? "one head" : "H = " + s.heads());
    }

    private static final String CSV_HEADER =
            "n,impl,causal,pass,status,median_ms,repeats,peak_increase_bytes,note";
    private static final int NOTE_MAX = 90;

    private AttentionBenchReport() {
    }

    /** Writes one CSV line per result; time and memory are empty where there is none. */
    static void writeCsv(Path file, List<BenchResult> rows) throws IOException {
        StringBuilder b = new StringBuilder(CSV_HEADER).append('\n');
        for (BenchResult r : rows) {
            b.append(r.n()).append(',').append(r.impl().label()).append(',').append(r.causal()).append(',')
                    .append(r.pass().label()).append(',').append(r.status().label()).append(',')
                    .append(Double.isNaN(r.medianMs()) ? "" : String.format(Locale.ROOT, "%.3f", r.medianMs()))
                    .append(',').append(r.repeats()).append(',')
                    .append(r.peakIncreaseBytes() < 0 ? "" : Long.toString(r.peakIncreaseBytes())).append(',')
                    .append(csvQuote(r.note())).append('\n');
        }
        Files.writeString(file, b, StandardCharsets.UTF_8);
    }

    /** Log-log chart of time against N: attn4j full and causal, the stock op, and the floor. */
    static void writeChart(Path file, List<BenchResult> rows, AttentionBench.Settings s) throws IOException {
        XYChart chart = new XYChartBuilder().width(1000).height(650)
                .title("Attention time vs sequence length (" + shape(s) + ", D = " + s.headDim() + ", " + typeName(s) + ")")
                .xAxisTitle("sequence length N (log scale)").yAxisTitle("time (ms)").build();
        // x is log2(N) on a linear axis, labelled with N: XChart's own log x axis places non-decade ticks
        // (2K, 4K, ...) linearly, i.e. in the wrong spots; on log2 every power of two gets an exact tick.
        chart.getStyler().setYAxisLogarithmic(true);
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
        chart.setCustomXAxisTickLabelsFormatter(AttentionBenchReport::powerOfTwoLabel);
        // One hue per implementation, darker for forward+backward, dashed for the computed floor.
        addSeries(chart, rows, Impl.ATTN4J, false, Pass.FORWARD, "attn4j fwd", new Color(0x1f77b4), false);
        addSeries(chart, rows, Impl.ATTN4J, false, Pass.FORWARD_BACKWARD, "attn4j fwd+bwd", new Color(0x08306b),
                false);
        addSeries(chart, rows, Impl.ATTN4J, true, Pass.FORWARD, "attn4j fwd causal", new Color(0x2ca02c), false);
        addSeries(chart, rows, Impl.ATTN4J, true, Pass.FORWARD_BACKWARD, "attn4j fwd+bwd causal",
                new Color(0x00441b), false);
        addSeries(chart, rows, Impl.STOCK, false, Pass.FORWARD, "ND4J stock fwd", new Color(0xd62728), false);
        addSeries(chart, rows, Impl.STOCK, false, Pass.FORWARD_BACKWARD, "ND4J stock fwd+bwd", new Color(0x67000d),
                false);
        addSeries(chart, rows, Impl.LIBTORCH, false, Pass.FORWARD, "libtorch fwd", new Color(0xff7f0e), false);
        addSeries(chart, rows, Impl.LIBTORCH, false, Pass.FORWARD_BACKWARD, "libtorch fwd+bwd", new Color(0x7f2704),
                false);
        addSeries(chart, rows, Impl.LIBTORCH, true, Pass.FORWARD, "libtorch fwd causal", new Color(0xe377c2), false);
        addSeries(chart, rows, Impl.LIBTORCH, true, Pass.FORWARD_BACKWARD, "libtorch fwd+bwd causal",
                new Color(0x7a0177), false);
        addSeries(chart, rows, Impl.FLOOR, false, Pass.FORWARD, "floor fwd (gemm rate)", new Color(0x8c8c8c), true);
        addSeries(chart, rows, Impl.FLOOR, false, Pass.FORWARD_BACKWARD, "floor fwd+bwd", new Color(0x404040), true);
        String path = file.toString();
        // XChart appends the extension itself.
        BitmapEncoder.saveBitmap(chart, path.endsWith(".png") ? path.substring(0, path.length() - 4) : path,
                BitmapEncoder.BitmapFormat.PNG);
    }

    private static void addSeries(XYChart chart, List<BenchResult> rows, Impl impl, boolean causal, Pass pass,
                                  String name, Color color, boolean dashed) {
        List<Double> x = new ArrayList<>();
        List<Double> y = new ArrayList<>();
        for (BenchResult r : rows) {
            if (r.impl() == impl && r.causal() == causal && r.pass() == pass && r.status() == Status.OK) {
                x.add(Math.log(r.n()) / Math.log(2));
                // A log axis cannot show 0; sub-microsecond times only occur in tiny test runs.
                y.add(Math.max(r.medianMs(), 1e-3));
            }
        }
        if (x.isEmpty()) {
            return;
        }
        XYSeries s = chart.addSeries(name, x, y);
        s.setLineColor(color);
        s.setMarkerColor(color);
        if (impl != Impl.FLOOR) {
            s.setMarker(pass == Pass.FORWARD ? SeriesMarkers.CIRCLE : SeriesMarkers.DIAMOND);
        }
        if (dashed) {
            s.setMarker(SeriesMarkers.NONE);
            s.setLineStyle(new BasicStroke(1.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f,
                    new float[] {6f, 4f}, 0f));
        }
    }

    /** "1K", "64K", "512" at whole log2 ticks, nothing between them. */
    private static String powerOfTwoLabel(double log2) {
        if (Math.abs(log2 - Math.rint(log2)) > 1e-9) {
            return "";
        }
        long n = 1L << Math.round(log2);
        return n >= 1024 ? n / 1024 + "K" : Long.toString(n);
    }

    /**
     * The markdown section: how and where it ran, what the columns measure, the table, the chart.
     *
     * @param command the command line as typed, for the reader to reproduce it
     */
    static String markdown(List<BenchResult> rows, AttentionBench.Settings s, GemmRate gemm, MachineInfo m,
                           String command, String memoryMeasure) {
        boolean torch = rows.stream().anyMatch(r -> r.impl() == Impl.LIBTORCH);
        String title = (s.portable() ? "Attention: attn4j's CPU and portable kernels vs ND4J's stock op"
                : "Attention: attn4j vs ND4J's stock op") + (torch ? " and PyTorch's fused kernel" : "")
                + (suffix(s).isEmpty() ? "" : " (" + shape(s) + (s.dataType() == DataType.DOUBLE ? ", float64" : "") + ")");
        StringBuilder b = new StringBuilder(MarkdownSection.opening(title, command,
                m, String.format(Locale.ROOT, "Every configuration is %s, D = %d, %s, scale "
                        + "1/sqrt(D); attn4j first runs for %s s at the smallest N (the JIT compiles its Java tile "
                        + "code); each time is the median of %d runs after at least %.0f ms of untimed runs up to N = %d "
                        + "(attn4j's back to back, the stock op's each after a garbage collection) and a single run beyond, forward "
                        + "only above N = %d. Peak is how far the process's resident memory rose "
                        + "during a configuration's runs above its level with the inputs already allocated; it counts "
                        + "outputs, gradients and working memory (so rises of a few MB are noise) and is measured as "
                        + "the %s. The floor is "
                        + "4·N²·D flops (QKᵀ and PV) per head at the %s gemm rate ND4J reached in the same run, "
                        + "%.0f GFLOP/s (the better of one %d³ gemm per core in parallel and one on one thread), "
                        + "3.5 times that for forward+backward and half of it for causal. Stock is ND4J's "
                        + "`DotProductAttention` and `dot_product_attention_bp` with ND4J's native threads at the "
                        + "number of cores; it builds the N x N score matrix and has no causal mask. attn4j runs with "
                        + "its default threading (docs/threading.md) and, for float32, its " + FlashAttention.tileCode()
                        + ".%s", shape(s), s.headDim(), typeName(s),
                        BigDecimal.valueOf(s.warmUpSeconds()).stripTrailingZeros().toPlainString(), s.repeats(),
                        s.settleSeconds() * 1e3,
                        s.repeatMaxN(), s.backwardMaxN(), memoryMeasure, typeName(s), gemm.best() / 1e9, gemm.size(),
                        torch ? " libtorch is PyTorch 2.7.1's `scaled_dot_product_attention`, which runs its fused "
                        + "flash-attention kernel on the CPU, timed by a separate program (not a dependency of "
                        + "attn4j) in its own process right after attn4j's runs at each N, on as many threads as "
                        + "cores, in attn4j's environment (its gemm calls OpenBLAS, the library whose rate is the floor's): "
                        + "the median of " + 3 + " runs after a warm-up." : "")));
        boolean portable = rows.stream().anyMatch(r -> r.impl() == Impl.PORTABLE);
        if (portable) {
            b.append("attn4j is the CPU kernel; portable is the same op with `attn4j.kernel=portable` (ND4J "
                    + "operations only, the path other backends take), timed right after it on the same inputs.\n\n");
        }
        b.append("| N | mask | attn4j fwd | attn4j fwd+bwd | attn4j peak fwd / fwd+bwd | ")
                .append(portable ? "portable fwd | portable fwd+bwd | portable peak fwd / fwd+bwd | portable / attn4j "
                        + "fwd | portable / attn4j fwd+bwd | " : "")
                .append(torch ? "libtorch fwd | libtorch fwd+bwd | attn4j / libtorch fwd | attn4j / libtorch "
                        + "fwd+bwd | " : "")
                .append("stock fwd | stock fwd+bwd | stock peak fwd / fwd+bwd | floor fwd | floor fwd+bwd |\n");
        b.append("|---:|---|---:|---:|---:|").append(portable ? "---:|---:|---:|---:|---:|" : "")
                .append(torch ? "---:|---:|---:|---:|" : "")
                .append("---:|---:|---:|---:|---:|\n");
        for (int n : s.lengths()) {
            for (boolean causal : new boolean[] {false, true}) {
                b.append("| ").append(n).append(" | ").append(causal ? "causal" : "none").append(" | ")
                        .append(time(find(rows, n, Impl.ATTN4J, causal, Pass.FORWARD))).append(" | ")
                        .append(time(find(rows, n, Impl.ATTN4J, causal, Pass.FORWARD_BACKWARD))).append(" | ")
                        .append(peaks(rows, n, Impl.ATTN4J, causal)).append(" | ");
                if (portable) {
                    b.append(time(find(rows, n, Impl.PORTABLE, causal, Pass.FORWARD))).append(" | ")
                            .append(time(find(rows, n, Impl.PORTABLE, causal, Pass.FORWARD_BACKWARD))).append(" | ")
                            .append(peaks(rows, n, Impl.PORTABLE, causal)).append(" | ")
                            .append(ratio(rows, n, causal, Pass.FORWARD, Impl.PORTABLE, Impl.ATTN4J)).append(" | ")
                            .append(ratio(rows, n, causal, Pass.FORWARD_BACKWARD, Impl.PORTABLE, Impl.ATTN4J))
                            .append(" | ");
                }
                if (torch) {
                    b.append(time(find(rows, n, Impl.LIBTORCH, causal, Pass.FORWARD))).append(" | ")
                            .append(time(find(rows, n, Impl.LIBTORCH, causal, Pass.FORWARD_BACKWARD))).append(" | ")
                            .append(ratio(rows, n, causal, Pass.FORWARD)).append(" | ")
                            .append(ratio(rows, n, causal, Pass.FORWARD_BACKWARD)).append(" | ");
                }
                if (causal) {
                    b.append("n/a | n/a | n/a | ");
                } else {
                    b.append(time(find(rows, n, Impl.STOCK, false, Pass.FORWARD))).append(" | ")
                            .append(time(find(rows, n, Impl.STOCK, false, Pass.FORWARD_BACKWARD))).append(" | ")
                            .append(peaks(rows, n, Impl.STOCK, false)).append(" | ");
                }
                b.append(time(find(rows, n, Impl.FLOOR, causal, Pass.FORWARD))).append(" | ")
                        .append(time(find(rows, n, Impl.FLOOR, causal, Pass.FORWARD_BACKWARD))).append(" |\n");
            }
        }
        b.append('\n').append(againstFloor(rows, s));
        b.append("![attention time against N, log-log](").append(png(s)).append(")\n\n");
        b.append("Every row, with full failure messages: [").append(csv(s)).append("](").append(csv(s))
                .append(").\n");
        return b.toString();
    }

    private static final int FLOOR_N = 4096;

    /** How far from its floor the op runs at N = 4096, from this run's rows. */
    private static String againstFloor(List<BenchResult> rows, AttentionBench.Settings s) {
        StringBuilder b = new StringBuilder();
        for (boolean causal : new boolean[] {false, true}) {
            Optional<BenchResult> f = find(rows, FLOOR_N, Impl.ATTN4J, causal, Pass.FORWARD);
            Optional<BenchResult> fb = find(rows, FLOOR_N, Impl.ATTN4J, causal, Pass.FORWARD_BACKWARD);
            Optional<BenchResult> ff = find(rows, FLOOR_N, Impl.FLOOR, causal, Pass.FORWARD);
            Optional<BenchResult> ffb = find(rows, FLOOR_N, Impl.FLOOR, causal, Pass.FORWARD_BACKWARD);
            if (ok(f) && ok(fb) && ok(ff) && ok(ffb)) {
                b.append(String.format(Locale.ROOT, "- At N = %d, %s: forward %.1f ms = %.2f x its floor; "
                                + "forward+backward %.1f ms = %.2f x its floor.%n", FLOOR_N,
                        causal ? "causal" : "full", f.get().medianMs(), f.get().medianMs() / ff.get().medianMs(),
                        fb.get().medianMs(), fb.get().medianMs() / ffb.get().medianMs()));
            }
        }
        int measured = 0;
        int ahead = 0;
        for (int n : s.lengths()) {
            for (Pass pass : Pass.values()) {
                Optional<BenchResult> ours = find(rows, n, Impl.ATTN4J, false, pass);
                Optional<BenchResult> stock = find(rows, n, Impl.STOCK, false, pass);
                if (ok(ours) && ok(stock)) {
                    measured++;
                    ahead += ours.get().medianMs() < stock.get().medianMs() ? 1 : 0;
                }
            }
        }
        b.append(String.format(Locale.ROOT, "- Against ND4J's stock op (full mask): attn4j faster in %d of the %d "
                + "configurations where both ran.%n", ahead, measured));
        int vsTorch = 0;
        int torchAhead = 0;
        for (int n : s.lengths()) {
            for (boolean causal : new boolean[] {false, true}) {
                for (Pass pass : Pass.values()) {
                    Optional<BenchResult> ours = find(rows, n, Impl.ATTN4J, causal, pass);
                    Optional<BenchResult> torch = find(rows, n, Impl.LIBTORCH, causal, pass);
                    if (ok(ours) && ok(torch)) {
                        vsTorch++;
                        torchAhead += ours.get().medianMs() < torch.get().medianMs() ? 0 : 1;
                    }
                }
            }
        }
        if (vsTorch > 0) {
            b.append(String.format(Locale.ROOT, "- Against libtorch: attn4j faster in %d of the %d configurations "
                    + "where both ran.%n", vsTorch - torchAhead, vsTorch));
        }
        List<Integer> ns = s.lengths();
        if (ns.size() >= 2) {
            int big = ns.get(ns.size() - 1);
            int small = ns.get(ns.size() - 2);
            Optional<BenchResult> pb = find(rows, big, Impl.ATTN4J, false, Pass.FORWARD);
            Optional<BenchResult> ps = find(rows, small, Impl.ATTN4J, false, Pass.FORWARD);
            if (ok(pb) && ok(ps) && ps.get().peakIncreaseBytes() > 0) {
                b.append(String.format(Locale.ROOT, "- Memory: forward peak rise %.1f MB at N = %d and %.1f MB at "
                                + "N = %d (x%.2f for twice the tokens; the output and LSE alone are "
                                + "4·N·(D+1) bytes).%n",
                        ps.get().peakIncreaseBytes() / 1e6, small, pb.get().peakIncreaseBytes() / 1e6, big,
                        pb.get().peakIncreaseBytes() / (double) ps.get().peakIncreaseBytes()));
            }
        }
        return b.append('\n').toString();
    }

    /** attn4j's time over libtorch's, where both ran. */
    private static String ratio(List<BenchResult> rows, int n, boolean causal, Pass pass) {
        return ratio(rows, n, causal, pass, Impl.ATTN4J, Impl.LIBTORCH);
    }

    /** The time of {@code top} over that of {@code bottom}, or empty if either did not run. */
    private static String ratio(List<BenchResult> rows, int n, boolean causal, Pass pass, Impl top, Impl bottom) {
        Optional<BenchResult> a = find(rows, n, top, causal, pass);
        Optional<BenchResult> b = find(rows, n, bottom, causal, pass);
        return ok(a) && ok(b) ? String.format(Locale.ROOT, "%.2f", a.get().medianMs() / b.get().medianMs()) : "";
    }

    private static boolean ok(Optional<BenchResult> r) {
        return r.isPresent() && r.get().status() == Status.OK;
    }

    private static Optional<BenchResult> find(List<BenchResult> rows, int n, Impl impl, boolean causal, Pass pass) {
        return rows.stream().filter(r -> r.n() == n && r.impl() == impl && r.causal() == causal && r.pass() == pass)
                .findFirst();
    }

    private static String time(Optional<BenchResult> row) {
        if (row.isEmpty()) {
            return "";
        }
        BenchResult r = row.get();
        if (r.status() != Status.OK) {
            return escape(shorten(r.note()));
        }
        double ms = r.medianMs();
        return ms >= 1000 ? String.format(Locale.ROOT, "%.2f s", ms / 1000)
                : ms >= 10 ? String.format(Locale.ROOT, "%.0f ms", ms)
                : String.format(Locale.ROOT, "%.2f ms", ms);
    }

    private static String peaks(List<BenchResult> rows, int n, Impl impl, boolean causal) {
        return megabytes(find(rows, n, impl, causal, Pass.FORWARD)) + " / "
                + megabytes(find(rows, n, impl, causal, Pass.FORWARD_BACKWARD));
    }

    private static String megabytes(Optional<BenchResult> row) {
        if (row.isEmpty() || row.get().status() != Status.OK || row.get().peakIncreaseBytes() < 0) {
            return "–";
        }
        double mb = row.get().peakIncreaseBytes() / 1e6;
        return mb >= 10 ? String.format(Locale.ROOT, "%.0f MB", mb) : String.format(Locale.ROOT, "%.1f MB", mb);
    }

    private static String shorten(String note) {
        return note.length() <= NOTE_MAX ? note : note.substring(0, NOTE_MAX - 1) + "…";
    }

    private static String escape(String cell) {
        return cell.replace("|", "\\|");
    }

    private static String csvQuote(String s) {
        if (s.isEmpty()) {
            return "";
        }
        return "\"" + s.replace("\"", "\"\"") + "\"";
    }
}
