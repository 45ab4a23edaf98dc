package org.attn4j.samples.bench;

import java.awt.Color;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.launch.JobEnvironment;
import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.sequence.DocumentBalance;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.ops.Documents;
import org.attn4j.samples.JobRank;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench distributed}: every sequence-parallel algorithm over P worker processes on this machine
 * (Aeron over loopback), causal float32 attention at a few N: each pass's time (the slowest rank's median) and the
 * bytes each rank sends. Writes {@code bench-distributed.csv}, {@code bench-distributed.png} (time) and
 * {@code bench-distributed-bytes.png} (bytes per rank), and the {@code distributed} section of
 * {@code benchmarks.md}. All P workers share this machine's cores, so more workers cannot run faster here; the
 * bytes, which do not depend on the machine, carry the scaling comparison.
 */
@Command(name = "distributed", mixinStandardHelpOptions = true,
        description = {"Time each sequence-parallel algorithm over P worker processes and count the bytes each rank",
            "sends. Writes OUT/bench-distributed.csv, two charts and a section of OUT/benchmarks.md."})
public final class DistributedBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-distributed.csv";
    static final String PNG = "bench-distributed.png";
    static final String BYTES_PNG = "bench-distributed-bytes.png";
    static final String SECTION = "distributed";

    @Option(names = "--workers", paramLabel = "P", split = ",", defaultValue = "1,2,4",
            description = "Worker counts (default: ${DEFAULT-VALUE}).")
    List<Integer> workers;

    @Option(names = "--balance-workers", paramLabel = "P", split = ",", defaultValue = "2,4,8",
            description = "Worker counts of the packed-sequence work-balance table (counted, not run; "
                    + "default: ${DEFAULT-VALUE}).")
    List<Integer> balanceWorkers;

    @Option(names = "--lengths", paramLabel = "N", split = ",", defaultValue = "1024,2048,4096",
            description = "Sequence lengths (default: ${DEFAULT-VALUE}).")
    List<Integer> lengths;

    @Option(names = "--algos", paramLabel = "NAME", split = ",",
            description = "Algorithms (default: all of them).")
    List<String> algos;

    @Option(names = "--batch", paramLabel = "B", defaultValue = "1", description = "Batch (default: ${DEFAULT-VALUE}).")
    int batch;

    @Option(names = "--heads", paramLabel = "H", defaultValue = "8",
            description = "Query heads (default: ${DEFAULT-VALUE}).")
    int heads;

    @Option(names = "--kv-heads", paramLabel = "HKV", defaultValue = "4",
            description = "Key/value heads (default: ${DEFAULT-VALUE}).")
    int kvHeads;

    @Option(names = "--dim", paramLabel = "D", defaultValue = "64",
            description = "Head size (default: ${DEFAULT-VALUE}).")
    int dim;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "5",
            description = "Timed runs (median) per measurement (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--warm-up", paramLabel = "SECONDS", defaultValue = "2",
            description = "How long each worker runs the local attention op untimed before anything is timed, so "
                    + "the JIT has compiled it (default: ${DEFAULT-VALUE}).")
    double warmUpSeconds;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "3g",
            description = "Java heap per worker (default: ${DEFAULT-VALUE}).")
    String heap;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV, charts and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    /** Where the workers ran, for the report. */
    private String where = "P worker JVMs on this machine over Aeron (UDP loopback)";

    /** One rank's result line. */
    record RankRow(String algo, int workers, int n, int rank, String config, double forwardMs, double backwardMs,
                   long forwardBytes, long backwardBytes) {
        /** The line a worker prints, the inverse of {@link #parse}. */
        String csv() {
            return String.format(Locale.ROOT, "%s,%d,%d,%d,%s,%.3f,%.3f,%d,%d", algo, workers, n, rank, config,
                    forwardMs, backwardMs, forwardBytes, backwardBytes);
        }

        static RankRow parse(String csv) {
            String[] f = csv.split(",", -1);
            return new RankRow(f[0], Integer.parseInt(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]), f[4],
                    Double.parseDouble(f[5]), Double.parseDouble(f[6]), Long.parseLong(f[7]), Long.parseLong(f[8]));
        }
    }

    /** One (algorithm, P, N): the slowest rank's times, the largest and mean bytes per rank. */
    record Row(String algo, int workers, int n, String config, double forwardMs, double backwardMs,
               long maxBytesPerRank, double meanBytesPerRank) {
        double totalMs() {
            return forwardMs + backwardMs;
        }
    }

    @Override
    public Integer call() throws IOException, InterruptedException {
        Options.heap("--heap", heap);
        Options.outputDirectory("--out", out);
        List<String> names = algos == null ? SequenceAlgorithm.all().stream().map(SequenceAlgorithm::name).toList()
                : algos;
        for (String name : names) {
            try {
                SequenceAlgorithm.byName(name);
            } catch (IllegalArgumentException e) {
                throw new UserInputException("--algos: " + e.getMessage());
            }
        }
        for (int p : workers) {
            if (p < 1 || p > 16) {
                throw new UserInputException("--workers must be in [1, 16], got " + p);
            }
        }
        for (int p : balanceWorkers) {
            if (p < 2 || p > 1024) {
                throw new UserInputException("--balance-workers must be in [2, 1024], got " + p);
            }
        }
        Options.atLeast("--warm-up", warmUpSeconds, 0);
        if (lengths.stream().anyMatch(n -> n < 1) || repeats < 1 || batch < 1 || dim < 1 || kvHeads < 1
                || heads % kvHeads != 0) {
            throw new UserInputException("need N >= 1, --repeats >= 1, --batch >= 1, --dim >= 1 and --heads a "
                    + "multiple of --kv-heads, got " + lengths + ", " + repeats + ", " + batch + ", " + dim + ", "
                    + heads + "/" + kvHeads);
        }
        Optional<JobEnvironment> job = JobRank.detect(spec, workers.size() == 1 ? workers.get(0) : -1);
        MachineInfo machine = MachineInfo.current();
        List<RankRow> ranks = new ArrayList<>();
        if (job.isPresent()) {
            workers = List.of(job.get().worldSize());
            where = "P ranks started by " + job.get().launcher() + ", over Aeron (UDP)";
            ranks = runAsRank(names);
            if (ranks == null) {
                return 0;                                      // rank 0 of the job writes the results
            }
        } else {
            for (int p : workers) {
                ranks.addAll(run(p, names));
            }
        }
        Files.createDirectories(out);
        List<Row> rows = aggregate(ranks);
        writeCsv(out.resolve(CSV), rows);
        writeTimeChart(out.resolve(PNG), rows);
        writeBytesChart(out.resolve(BYTES_PNG), rows);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION,
                markdown(rows, machine, command.strip()));
        PrintWriter log = spec.commandLine().getOut();
        log.printf("wrote %s, %s, %s and the '%s' section of %s%n", out.resolve(CSV), out.resolve(PNG),
                out.resolve(BYTES_PNG), SECTION, out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    private List<RankRow> run(int p, List<String> names) throws IOException, InterruptedException {
        PrintWriter log = spec.commandLine().getOut();
        List<RankRow> rows = new CopyOnWriteArrayList<>();
        List<String> tail = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(p, DistributedBenchWorker.class.getName())
                .args(List.of(String.join(",", names),
                        lengths.stream().map(String::valueOf).collect(Collectors.joining(",")),
                        Integer.toString(batch), Integer.toString(heads), Integer.toString(kvHeads),
                        Integer.toString(dim), Integer.toString(repeats), Double.toString(warmUpSeconds)))
                .heap(heap).timeout(Duration.ofMinutes(60))
                .output(line -> {
                    int at = line.indexOf(DistributedBenchWorker.RESULT);
                    if (at >= 0) {
                        rows.add(RankRow.parse(line.substring(at + DistributedBenchWorker.RESULT.length())));
                        synchronized (log) {
                            log.println(line);
                            log.flush();
                        }
                    }
                }, tail::add).build().run();
        if (!r.succeeded()) {
            throw new IllegalStateException("bench distributed: the " + p + " workers failed (" + r
                    + "); their stderr:\n" + String.join("\n", tail));
        }
        return rows;
    }

    /**
     * This process is one rank of a job a scheduler started: it measures with the others, and every rank's rows
     * travel to every rank; null on the ranks other than 0.
     */
    private List<RankRow> runAsRank(List<String> names) {
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            List<RankRow> mine = DistributedBenchWorker.run(t, names, lengths.stream().mapToInt(Integer::intValue)
                    .toArray(), batch, heads, kvHeads, dim, repeats, warmUpSeconds);
            if (mine.isEmpty()) {
                throw new UserInputException("no algorithm of " + names + " accepts P = " + t.worldSize() + " with N "
                        + "in " + lengths);
            }
            double[][] m = new double[mine.size()][];
            for (int i = 0; i < m.length; i++) {
                RankRow r = mine.get(i);
                m[i] = new double[] {names.indexOf(r.algo()), r.n(), r.forwardMs(), r.backwardMs(), r.forwardBytes(),
                    r.backwardBytes()};
            }
            Communicator world = Communicator.world(t);
            List<INDArray> all = world.allGather(Nd4j.createFromArray(m));
            world.barrier();                                   // no rank closes while another still receives
            if (t.rank() != 0) {
                return null;
            }
            List<RankRow> rows = new ArrayList<>();
            for (int rank = 0; rank < all.size(); rank++) {
                double[][] x = all.get(rank).toDoubleMatrix();
                for (int i = 0; i < x.length; i++) {
                    rows.add(new RankRow(names.get((int) x[i][0]), t.worldSize(), (int) x[i][1], rank,
                            mine.get(i).config(), x[i][2], x[i][3], (long) x[i][4], (long) x[i][5]));
                }
            }
            return rows;
        }
    }

    static List<Row> aggregate(List<RankRow> ranks) {
        Map<String, List<RankRow>> by = new LinkedHashMap<>();
        for (RankRow r : ranks) {
            by.computeIfAbsent(r.algo() + "/" + r.workers() + "/" + r.n(), x -> new ArrayList<>()).add(r);
        }
        List<Row> rows = new ArrayList<>();
        for (List<RankRow> g : by.values()) {
            RankRow first = g.get(0);
            rows.add(new Row(first.algo(), first.workers(), first.n(), first.config(),
                    g.stream().mapToDouble(RankRow::forwardMs).max().orElseThrow(),
                    g.stream().mapToDouble(RankRow::backwardMs).max().orElseThrow(),
                    g.stream().mapToLong(x -> x.forwardBytes() + x.backwardBytes()).max().orElseThrow(),
                    g.stream().mapToLong(x -> x.forwardBytes() + x.backwardBytes()).average().orElseThrow()));
        }
        rows.sort(Comparator.comparing(Row::algo).thenComparingInt(Row::workers).thenComparingInt(Row::n));
        return rows;
    }

    private static void writeCsv(Path file, List<Row> rows) throws IOException {
        StringBuilder b = new StringBuilder("algo,workers,n,config,forward_ms,backward_ms,max_bytes_per_rank,"
                + "mean_bytes_per_rank\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%s,%d,%d,%s,%.3f,%.3f,%d,%.1f%n", r.algo(), r.workers(), r.n(),
                    r.config(), r.forwardMs(), r.backwardMs(), r.maxBytesPerRank(), r.meanBytesPerRank()));
        }
        Files.writeString(file, b, StandardCharsets.UTF_8);
    }

    private static final Color[] COLORS = {new Color(0x1f77b4), new Color(0xff7f0e), new Color(0x2ca02c),
        new Color(0xd62728), new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2)};

    private void writeTimeChart(Path file, List<Row> rows) throws IOException {
        int p = workers.stream().mapToInt(Integer::intValue).max().orElse(1);
        XYChart chart = new XYChartBuilder().width(1000).height(650)
                .title("Sequence-parallel attention, causal float32, forward+backward, " + p + " worker processes "
                        + "on " + Runtime.getRuntime().availableProcessors() + " cores")
                .xAxisTitle("N (log scale)").yAxisTitle("ms (slowest rank)").build();
        style(chart);
        List<String> names = rows.stream().map(Row::algo).distinct().toList();
        for (int i = 0; i < names.size(); i++) {
            String name = names.get(i);
            List<Row> mine = rows.stream().filter(r -> r.algo().equals(name) && r.workers() == p).toList();
            if (!mine.isEmpty()) {
                XYSeries s = chart.addSeries(name + " (" + mine.get(0).config() + ")",
                        mine.stream().map(r -> Math.log(r.n()) / Math.log(2)).toList(),
                        mine.stream().map(Row::totalMs).toList());
                s.setLineColor(COLORS[i % COLORS.length]);
                s.setMarkerColor(COLORS[i % COLORS.length]);
                s.setMarker(SeriesMarkers.CIRCLE);
            }
        }
        chart.setCustomXAxisTickLabelsFormatter(log2 -> Math.abs(log2 - Math.rint(log2)) > 1e-9 ? ""
                : Long.toString(1L << Math.round(log2)));
        save(chart, file);
    }

    private void writeBytesChart(Path file, List<Row> rows) throws IOException {
        int n = lengths.stream().mapToInt(Integer::intValue).max().orElse(1);
        XYChart chart = new XYChartBuilder().width(1000).height(650)
                .title("Bytes sent per rank (largest rank), forward+backward, N = " + n + ", causal float32")
                .xAxisTitle("worker processes P").yAxisTitle("MB (10^6 bytes)").build();
        style(chart);
        List<String> names = rows.stream().map(Row::algo).distinct().toList();
        for (int i = 0; i < names.size(); i++) {
            String name = names.get(i);
            List<Row> mine = rows.stream().filter(r -> r.algo().equals(name) && r.n() == n).toList();
            if (!mine.isEmpty()) {
                XYSeries s = chart.addSeries(name, mine.stream().map(r -> (double) r.workers()).toList(),
                        mine.stream().map(r -> r.maxBytesPerRank() / 1e6).toList());
                s.setLineColor(COLORS[i % COLORS.length]);
                s.setMarkerColor(COLORS[i % COLORS.length]);
                s.setMarker(SeriesMarkers.DIAMOND);
            }
        }
        save(chart, file);
    }

    private static void style(XYChart chart) {
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
    }

    private static void save(XYChart chart, Path file) throws IOException {
        String path = file.toString();
        BitmapEncoder.saveBitmap(chart, path.substring(0, path.length() - 4), BitmapEncoder.BitmapFormat.PNG);
    }

    private String markdown(List<Row> rows, MachineInfo m, String command) {
        StringBuilder b = new StringBuilder(MarkdownSection.opening("Sequence-parallel attention over worker "
                + "processes", command, m, String.format(Locale.ROOT, "Causal attention, float32, B = %d, H = %d, "
                + "Hkv = %d, D = %d, each algorithm in its default layout and options (the config column); "
                + "linear-attention algorithms (%s) run a different op, whose times do not compare with the "
                + "others'. %s. Time is the slowest rank's median of %d timed forward+backward passes after two "
                + "untimed ones, with a barrier before each, once every worker has run the local attention op "
                + "untimed for %s s; bytes are what each rank's transport sent in one "
                + "forward+backward pass (the largest rank, and the mean over ranks). When all workers share one "
                + "machine's %d cores, times at P > 1 show an algorithm's overhead, not its scaling; the bytes do not "
                + "depend on the machine and equal the formulas in docs/algorithms.md.", batch, heads, kvHeads, dim,
                SequenceAlgorithm.names(false), where, repeats, ClusterBenchCommand.fmt(warmUpSeconds), m.cores())));
        b.append("| algorithm | P | config | N | forward | backward | bytes / rank (max) | bytes / rank (mean) |\n"
                + "|---|---:|---|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "| %s | %d | %s | %d | %.1f ms | %.1f ms | %.2f MB | %.2f MB |%n",
                    r.algo(), r.workers(), r.config(), r.n(), r.forwardMs(), r.backwardMs(),
                    r.maxBytesPerRank() / 1e6, r.meanBytesPerRank() / 1e6));
        }
        b.append("\nWith fewer K/V heads than query heads, ring attention moves the K/V side, while WallFacer's "
                + "backward pass and ATTENTION2D's rows move the query side, so at small P both can send more than "
                + "the ring; ATTENTION2D's bytes per rank fall as 1/sqrt(P) (docs/algorithms.md). The striped layout "
                + "ATTENTION2D needs leaves partly masked tiles on every rank, so its local causal work costs more "
                + "than the zigzag layout's.\n");
        b.append("\n![time](").append(PNG).append(")\n\n![bytes](").append(BYTES_PNG).append(")\n");
        b.append(documentBalance());
        return b.toString();
    }

    /** Seeds of the random packed sequences of {@link #documentBalance}. */
    private static final int BALANCE_SEEDS = 10;

    /**
     * Packed sequences: the worst spread of causal attention work over the ranks (largest deviation from the mean)
     * for each layout, over random documents, at the largest N and every P above 1.
     */
    private String documentBalance() {
        int n = lengths.stream().mapToInt(Integer::intValue).max().orElse(1);
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT, "%n### Work per rank with packed sequences%n%n"
                + "Causal attention over one sequence of N = %d holding documents of random lengths (uniform from 1 "
                + "to the longest, about one run in five padding), %d seeds: the largest deviation of one rank's "
                + "work (score entries inside a document) from the mean, worst over the seeds. Counted from the "
                + "documents and the layout, not timed; ring, WallFacer, Ulysses and all-gather take any of these "
                + "layouts, ATTENTION2D is striped (cyclic) by design, LASP's work does not depend on documents.%n%n"
                + "| P | longest document | contiguous | zigzag | striped |%n|---:|---:|---:|---:|---:|%n", n,
                BALANCE_SEEDS));
        for (int p : balanceWorkers) {
            if (p < 2 || n % (2 * p) != 0) {
                continue;
            }
            for (int longest : new int[] {Math.max(1, n / 64), Math.max(1, n / 8), n}) {
                b.append(String.format(Locale.ROOT, "| %d | %d |", p, longest));
                for (SequenceLayout layout : new SequenceLayout[] {SequenceLayout.CONTIGUOUS, SequenceLayout.ZIGZAG,
                        SequenceLayout.STRIPED}) {
                    double worst = 0;
                    for (long seed = 0; seed < BALANCE_SEEDS; seed++) {
                        Documents docs = Documents.random(seed, 1, n, longest);
                        worst = Math.max(worst, DocumentBalance.spread(DocumentBalance.work(layout, docs, p, true)));
                    }
                    b.append(String.format(Locale.ROOT, " %.1f %% |", 100 * worst));
                }
                b.append('\n');
            }
        }
        return b.toString();
    }
}
