package org.attn4j.samples.bench;

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

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.launch.NamespaceCluster;
import org.attn4j.distributed.plan.AttentionRate;
import org.attn4j.distributed.plan.ClusterSpec;
import org.attn4j.distributed.plan.ModelSpec;
import org.attn4j.distributed.plan.PlanProblem;
import org.attn4j.distributed.plan.Planner;
import org.attn4j.distributed.plan.Prediction;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench cluster}: sequence-parallel attention on a cluster of network namespaces on this machine,
 * one worker per "host", every host's link limited by a {@code tc} token bucket, beside what {@code attn4j plan}
 * predicts for that bandwidth and this machine's attention rate. The workers meet through the rendezvous as on
 * real hosts. Needs root (or CAP_NET_ADMIN).
 *
 * <p>The prediction charges each algorithm the rate of its own local work on this machine, measured first on the
 * same hosts with links that cost next to nothing, and a per-message latency of {@code --latency-us}; the report
 * also shows the plan with the kernel's rate shared by the P workers.
 */
@Command(name = "cluster", mixinStandardHelpOptions = true,
        description = {"Run sequence-parallel attention on network namespaces with rate-limited links and print",
            "the measured time beside the plan's prediction. Writes OUT/bench-cluster.csv and a section of",
            "OUT/benchmarks.md. Needs root (or CAP_NET_ADMIN)."})
public final class ClusterBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-cluster.csv";
    static final String SECTION = "cluster";
    private static final int MASTER_PORT = 29500;
    /** The bandwidth the plan is given for links without a limit (a veth pair moves several GB/s). */
    private static final double UNLIMITED_MBIT = 40_000;

    @Option(names = "--hosts", paramLabel = "P", defaultValue = "4",
            description = "Hosts (namespaces), one worker each (default: ${DEFAULT-VALUE}).")
    int hosts;

    @Option(names = "--rates", paramLabel = "MBIT", split = ",", defaultValue = "200,1000",
            description = "Link rates to run at, Mbit/s (default: ${DEFAULT-VALUE}).")
    List<Double> rates;

    @Option(names = "--algos", paramLabel = "NAME", split = ",", defaultValue = "ring,attention2d,ulysses",
            description = "Algorithms (default: ${DEFAULT-VALUE}).")
    List<String> algos;

    @Option(names = {"-N", "--length"}, paramLabel = "N", defaultValue = "4096",
            description = "Sequence length (default: ${DEFAULT-VALUE}).")
    int length;

    @Option(names = "--heads", paramLabel = "H", defaultValue = "8",
            description = "Query heads (default: ${DEFAULT-VALUE}).")
    int heads;

    @Option(names = "--kv-heads", paramLabel = "HKV", defaultValue = "4",
            description = "Key/value heads (default: ${DEFAULT-VALUE}).")
    int kvHeads;

    @Option(names = "--dim", paramLabel = "D", defaultValue = "64",
            description = "Head size (default: ${DEFAULT-VALUE}).")
    int dim;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "3",
            description = "Timed passes (median) per algorithm (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--warm-up", paramLabel = "SECONDS", defaultValue = "2",
            description = "How long each worker runs the local attention op untimed before anything is timed, so "
                    + "the JIT has compiled it (default: ${DEFAULT-VALUE}).")
    double warmUpSeconds;

    @Option(names = "--latency-us", paramLabel = "US", defaultValue = "100",
            description = "Per-message latency the prediction charges, microseconds (default: ${DEFAULT-VALUE}).")
    double latencyUs;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    /**
     * One algorithm at one rate: measured and predicted forward+backward, the prediction with the algorithm's own
     * rate on this machine and with the kernel's rate shared by the ranks.
     */
    record Row(double rateMbit, String algo, String config, double measuredMs, double predictedMs,
               double predictedComputeMs, double kernelPredictedMs, double ownTflops, long bytesPerRank) {
        double ratio() {
            return measuredMs / predictedMs;
        }
    }

    @Override
    public Integer call() throws Exception {
        Options.atLeast("--heads", heads, 1);
        Options.atLeast("--kv-heads", kvHeads, 1);
        Options.atLeast("--dim", dim, 1);
        Options.atLeast("--warm-up", warmUpSeconds, 0);
        Options.atLeast("--latency-us", latencyUs, 0);
        if (heads % kvHeads != 0) {
            throw new UserInputException("--heads must be a multiple of --kv-heads, got " + heads + " and " + kvHeads);
        }
        Options.outputDirectory("--out", out);
        Optional<String> why = NamespaceCluster.unavailable();
        if (why.isPresent()) {
            throw new UserInputException("bench cluster builds its hosts from network namespaces: " + why.get());
        }
        for (String name : algos) {
            try {
                SequenceAlgorithm.byName(name);
            } catch (IllegalArgumentException e) {
                throw new UserInputException("--algos: " + e.getMessage());
            }
        }
        if (hosts < 2 || hosts > 16 || rates.stream().anyMatch(r -> !(r > 0)) || repeats < 1 || length % hosts != 0) {
            throw new UserInputException("need 2 <= --hosts <= 16, positive --rates, --repeats >= 1 and N a multiple"
                    + " of P, got " + hosts + ", " + rates + ", " + repeats + ", " + length);
        }
        PrintWriter log = spec.commandLine().getOut();
        AttentionRate rate = AttentionRate.measure();
        log.printf(Locale.ROOT, "attention kernel rate of this machine: %.4f TFLOP/s (%s)%n", rate.tflops(),
                rate.shape());
        log.flush();
        // Each algorithm's own rate here: its time with links that cost next to nothing, all of it counted as
        // compute (this includes what its communication threads take from the shared cores).
        Map<String, Double> own = new LinkedHashMap<>();
        for (DistributedBenchCommand.Row m : measure(0)) {
            double flopsAtOneTflops = Planner.plan(problem(UNLIMITED_MBIT, 1.0)).get(m.algo()).computeSeconds();
            own.put(m.algo(), flopsAtOneTflops / (m.totalMs() / 1e3));
        }
        List<Row> rows = new ArrayList<>();
        for (double mbit : rates) {
            List<DistributedBenchCommand.Row> measured = measure(mbit);
            Planner.Plan kernel = Planner.plan(problem(mbit, rate.tflops() / hosts));
            for (DistributedBenchCommand.Row m : measured) {
                Prediction k = kernel.get(m.algo());
                Prediction c = Planner.plan(problem(mbit, own.get(m.algo()))).get(m.algo());
                rows.add(new Row(mbit, m.algo(), m.config(), m.totalMs(), c.totalSeconds() * 1e3,
                        c.computeSeconds() * 1e3, k.totalSeconds() * 1e3, own.get(m.algo()),
                        m.maxBytesPerRank()));
            }
        }
        Files.createDirectories(out);
        writeCsv(out.resolve(CSV), rows);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        String table = markdown(rows, rate, MachineInfo.current(), command.strip());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION, table);
        log.print(table);
        log.printf("wrote %s and the '%s' section of %s%n", out.resolve(CSV), SECTION,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    /** The plan's problem on this cluster at {@code mbit} with a per-rank attention rate. */
    private PlanProblem problem(double mbit, double tflops) {
        return new PlanProblem(new ClusterSpec(hosts, 1, mbit / 8000, latencyUs, mbit / 8000, latencyUs, 1),
                new ModelSpec(1, heads, kvHeads, dim, 4, 1), length, true, false, tflops);
    }

    /** The algorithms on a fresh cluster whose links run at {@code mbit} (0: no limit); the slowest rank's. */
    private List<DistributedBenchCommand.Row> measure(double mbit) throws IOException, InterruptedException {
        PrintWriter log = spec.commandLine().getOut();
        List<DistributedBenchCommand.RankRow> ranks = new CopyOnWriteArrayList<>();
        List<String> tail = new CopyOnWriteArrayList<>();
        try (NamespaceCluster cluster = NamespaceCluster.create(hosts, mbit)) {
            LaunchResult r = LocalLauncher.builder(hosts, DistributedBenchWorker.class.getName())
                    .rendezvous(cluster.address(0), MASTER_PORT).prefix(cluster::prefix)
                    .args(List.of(String.join(",", algos), Integer.toString(length), "1", Integer.toString(heads),
                            Integer.toString(kvHeads), Integer.toString(dim), Integer.toString(repeats),
                            Double.toString(warmUpSeconds)))
                    .heap("1g").timeout(Duration.ofMinutes(30)).env("ATTN4J_TIMEOUT_MS", "120000")
                    .output(line -> {
                        int at = line.indexOf(DistributedBenchWorker.RESULT);
                        if (at >= 0) {
                            ranks.add(DistributedBenchCommand.RankRow.parse(line.substring(at
                                    + DistributedBenchWorker.RESULT.length())));
                        }
                    }, tail::add).build().run();
            if (!r.succeeded()) {
                throw new IllegalStateException("bench cluster: the workers at " + mbit + " Mbit/s failed (" + r
                        + "); their stderr:\n" + String.join("\n", tail));
            }
        }
        List<DistributedBenchCommand.Row> rows = DistributedBenchCommand.aggregate(ranks);
        for (DistributedBenchCommand.Row row : rows) {
            log.printf(Locale.ROOT, "%s %s: %.1f ms forward+backward%n", mbit > 0 ? fmt(mbit) + " Mbit/s"
                    : "unlimited links", row.algo(), row.totalMs());
        }
        log.flush();
        return rows;
    }

    private static void writeCsv(Path file, List<Row> rows) throws IOException {
        StringBuilder b = new StringBuilder("rate_mbit,algo,config,measured_ms,predicted_ms,predicted_compute_ms,"
                + "kernel_rate_predicted_ms,own_tflops,max_bytes_per_rank\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "%s,%s,%s,%.3f,%.3f,%.3f,%.3f,%.6f,%d%n", fmt(r.rateMbit()),
                    r.algo(), r.config(), r.measuredMs(), r.predictedMs(), r.predictedComputeMs(),
                    r.kernelPredictedMs(), r.ownTflops(), r.bytesPerRank()));
        }
        Files.writeString(file, b, StandardCharsets.UTF_8);
    }

    /** The table, and per rate whether the plan ranks the algorithms in the measured order. */
    private String markdown(List<Row> rows, AttentionRate rate, MachineInfo m, String command) {
        StringBuilder b = new StringBuilder(MarkdownSection.opening("Planned against measured, on rate-limited "
                + "links", command, m, String.format(Locale.ROOT, "%d hosts, each a Linux network namespace with its "
                + "own address on a bridge, run one worker each, started with torchrun's variables, and every host's "
                + "outgoing link is limited by a tc token bucket to the rate shown. Causal attention, float32, B = 1, "
                + "H = %d, Hkv = %d, D = %d, N = %d, each algorithm in its default layout. Measured is the slowest "
                + "rank's median of %d forward+backward passes, once every worker has run the local attention op "
                + "untimed for %s s. Predicted is `attn4j plan`'s model for %d nodes of one worker, with the link "
                + "rate as the bandwidth, %.0f us per message, and each algorithm's own attention rate on this "
                + "machine: its time on the same hosts with unlimited links, counted as compute (so it includes what "
                + "the algorithm's communication threads take from the shared cores). For comparison, the last "
                + "column plans with the kernel's rate (%.4f TFLOP/s on %s) shared by the %d workers.", hosts, heads,
                kvHeads, dim, length, repeats, fmt(warmUpSeconds), hosts, latencyUs, rate.tflops(), rate.shape(),
                hosts)));
        b.append("| link | algorithm | config | measured | predicted | of which compute | measured / predicted "
                + "| plan at the kernel's rate | MB sent / rank |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "| %s Mbit/s | %s | %s | %.0f ms | %.0f ms | %.0f ms | %.2f | %.0f ms "
                    + "| %.2f |%n", fmt(r.rateMbit()), r.algo(), r.config(), r.measuredMs(), r.predictedMs(),
                    r.predictedComputeMs(), r.ratio(), r.kernelPredictedMs(), r.bytesPerRank() / 1e6));
        }
        b.append('\n');
        for (double mbit : rates) {
            List<Row> at = rows.stream().filter(r -> r.rateMbit() == mbit).toList();
            String measuredOrder = at.stream().sorted(Comparator.comparingDouble(Row::measuredMs)).map(Row::algo)
                    .collect(Collectors.joining(" < "));
            String plannedOrder = at.stream().sorted(Comparator.comparingDouble(Row::predictedMs)).map(Row::algo)
                    .collect(Collectors.joining(" < "));
            double worst = at.stream().mapToDouble(r -> Math.abs(r.ratio() - 1)).max().orElse(Double.NaN);
            b.append(String.format(Locale.ROOT, "- %s Mbit/s: measured %s; planned %s (%s); largest error of a "
                    + "prediction %.0f %%.%n", fmt(mbit), measuredOrder, plannedOrder,
                    measuredOrder.equals(plannedOrder) ? "same order" : "a different order", 100 * worst));
        }
        return b.toString();
    }

    static String fmt(double x) {
        return x == Math.rint(x) ? Long.toString((long) x) : Double.toString(x);
    }
}
