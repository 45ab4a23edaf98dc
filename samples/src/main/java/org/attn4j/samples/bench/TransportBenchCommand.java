package org.attn4j.samples.bench;

import java.awt.Color;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.launch.NamespaceCluster;
import org.attn4j.distributed.transport.AeronTransportContext;
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
 * {@code attn4j bench transport}: the Aeron transport between worker processes on this machine (over IPC through
 * the job's one media driver, or with {@code --path udp} over UDP loopback): point-to-point latency (median and
 * 99th percentile) and bandwidth (one way and both ways at once) between two workers for message sizes from
 * {@code --min-size} to {@code --max-size}, and ring all-gather and reduce-scatter bus bandwidth for each of
 * {@code --ring-workers}; with {@code --compare-mpi}, Open MPI's figures from the anchor beside them. Writes {@code bench-transport.csv}, {@code bench-transport.png} and the
 * {@code transport} section of {@code benchmarks.md}.
 */
@Command(name = "transport", mixinStandardHelpOptions = true,
        description = {"Measure the Aeron transport between worker processes: point-to-point latency and bandwidth,",
            "ring all-gather / reduce-scatter bus bandwidth. Writes OUT/bench-transport.csv, OUT/bench-transport.png",
            "and a section of OUT/benchmarks.md."})
public final class TransportBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-transport.csv";
    /** Each round's figures, when there is more than one round ({@code --rounds}). */
    static final String ROUNDS_CSV = "bench-transport-rounds.csv";
    private static final String CSV_HEADER = "source,kind,workers,bytes,median_us,gb_per_s,bus_gb_per_s,p99_us";
    static final String PNG = "bench-transport.png";
    static final String SECTION = "transport";
    private static final long P2P_SIZE = 16L << 20;
    /** The rendezvous port on the first namespace's address. */
    private static final int NAMESPACE_MASTER_PORT = 29500;

    @Option(names = "--min-size", paramLabel = "BYTES", defaultValue = "4k",
            description = "Smallest point-to-point message (k, m suffixes; default: ${DEFAULT-VALUE}).")
    String minSize;

    @Option(names = "--max-size", paramLabel = "BYTES", defaultValue = "64m",
            description = "Largest point-to-point message; sizes double from the smallest "
                    + "(default: ${DEFAULT-VALUE}).")
    String maxSize;

    @Option(names = "--ring-min-size", paramLabel = "BYTES", defaultValue = "1m",
            description = "Smallest ring collective size (the whole gathered array; default: ${DEFAULT-VALUE}).")
    String ringMinSize;

    @Option(names = "--ring-max-size", paramLabel = "BYTES", defaultValue = "64m",
            description = "Largest ring collective size; sizes grow 4-fold, and each worker holds the arrays of "
                    + "every size at once, up to four times this (default: ${DEFAULT-VALUE}).")
    String ringMaxSize;

    @Option(names = "--ring-workers", paramLabel = "P", split = ",", defaultValue = "2,4",
            description = "Ring sizes to measure (default: ${DEFAULT-VALUE}).")
    List<Integer> ringWorkers;

    @Option(names = "--warm-up", paramLabel = "SECONDS", defaultValue = "2",
            description = "Untimed calls before the point-to-point measurements and before each ring size, so "
                    + "the JIT has compiled the paths they take: at least this long, and on while the workers' JIT "
                    + "compilers are still busy, up to ten times as long (default: ${DEFAULT-VALUE}).")
    double warmUp;

    @Option(names = "--repeats", paramLabel = "R", defaultValue = "7",
            description = "Timed runs (median) per measurement (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--rounds", paramLabel = "N", defaultValue = "1",
            description = "Run the whole measurement N times, alternating attn4j's runs with Open MPI's and "
                    + "iperf3's, and report each figure's median over the rounds (each round's figures go to "
                    + ROUNDS_CSV + "; default: ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--path", paramLabel = "PATH", defaultValue = "ipc",
            description = "How the workers (all on this machine) reach each other: ipc (Aeron IPC through one media "
                    + "driver, the default for ranks on one host), tcp or udp (loopback, the paths between hosts; "
                    + "default: ${DEFAULT-VALUE}).")
    String path;

    @Option(names = "--network", paramLabel = "PROTOCOL", defaultValue = "tcp",
            description = "With --namespaces, the protocol between them: tcp (the transport's default) or udp "
                    + "(default: ${DEFAULT-VALUE}).")
    String network;

    @Option(names = "--compare-mpi", paramLabel = "DIR",
            description = "Also run Open MPI's collectives from DIR/run.sh (the anchor in "
                    + "../shared/anchors/mpi-collectives) right after, and with --namespaces its program across the "
                    + "namespaces too (one rank each, over TCP), and put its figures beside these.")
    Path compareMpi;

    @Option(names = "--namespaces", paramLabel = "HOSTS", defaultValue = "0",
            description = "Also run the ring collectives across HOSTS network namespaces on a bridge (one "
                    + "worker each, no rate limit; needs root), beside iperf3's TCP throughput between two of them "
                    + "when iperf3 is installed, and a bare ring in C over TCP (how fast a ring with nothing around "
                    + "it goes there) when gcc is (default: ${DEFAULT-VALUE}: off).")
    int namespaces;

    @Option(names = "--link-mtu", paramLabel = "BYTES", defaultValue = "0",
            description = "With --namespaces, give their links this MTU (9000: jumbo frames) and let the workers' "
                    + "UDP datagrams follow it (ATTN4J_TRANSPORT_MTU=link); default: the kernel's 1500 and the "
                    + "transport's default datagrams.")
    int linkMtu;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "2g",
            description = "Java heap per worker (default: ${DEFAULT-VALUE}).")
    String heap;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV, chart and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    /** The UDP MTU the workers across namespaces used (from rank 0's report). */
    private volatile int namespaceUdpMtu;

    /** One measurement, as a worker reported it. */
    record Row(String kind, int workers, long bytes, double medianUs, double gbps, double busGbps, double p99Us) {
        static Row parse(String csv) {
            String[] f = csv.split(",", -1);
            return new Row(f[0], Integer.parseInt(f[1]), Long.parseLong(f[2]), Double.parseDouble(f[3]),
                    Double.parseDouble(f[4]), number(f[5]), f.length > 6 ? number(f[6]) : Double.NaN);
        }

        private static double number(String f) {
            return f.isEmpty() ? Double.NaN : Double.parseDouble(f);
        }

        /** Each measurement's median over the rounds, field by field, in the first round's order. */
        static List<Row> medians(List<List<Row>> rounds) {
            return RoundMedians.of(rounds, r -> List.of(r.kind(), r.workers(), r.bytes()),
                    r -> new double[] {r.medianUs(), r.gbps(), r.busGbps(), r.p99Us()},
                    (r, m) -> new Row(r.kind(), r.workers(), r.bytes(), m[0], m[1], m[2], m[3]));
        }
    }

    @Override
    public Integer call() throws IOException, InterruptedException {
        Options.heap("--heap", heap);
        Options.outputDirectory("--out", out);
        long min = bytes("--min-size", minSize);
        long max = bytes("--max-size", maxSize);
        long ringMin = bytes("--ring-min-size", ringMinSize);
        long ringMax = bytes("--ring-max-size", ringMaxSize);
        if (warmUp < 0) {
            throw new UserInputException("--warm-up must be >= 0 seconds, got " + warmUp);
        }
        if (min < 4 || max < min || ringMin < 4 || ringMax < ringMin || repeats < 1) {
            throw new UserInputException("need 4 <= --min-size <= --max-size, 4 <= --ring-min-size <= "
                    + "--ring-max-size and --repeats >= 1, got " + min + ", " + max + ", " + ringMin + ", " + ringMax
                    + ", " + repeats);
        }
        if (rounds < 1 || rounds > 25) {
            throw new UserInputException("--rounds must be in [1, 25], got " + rounds);
        }
        for (int p : ringWorkers) {
            if (p < 2 || p > 16) {
                throw new UserInputException("--ring-workers must be in [2, 16], got " + p);
            }
        }
        if (!path.equals("ipc") && !path.equals("udp") && !path.equals("tcp")) {
            throw new UserInputException("--path must be ipc, tcp or udp, got \"" + path + "\"");
        }
        if (!network.equals("tcp") && !network.equals("udp")) {
            throw new UserInputException("--network must be tcp or udp, got \"" + network + "\"");
        }
        if (namespaces == 1 || namespaces < 0 || namespaces > 16) {
            throw new UserInputException("--namespaces must be 0 (off) or in [2, 16], got " + namespaces);
        }
        if (linkMtu != 0 && (linkMtu < 576 || linkMtu > 65535)) {
            throw new UserInputException("--link-mtu must be in [576, 65535] bytes, got " + linkMtu);
        }
        if (namespaces > 0 && NamespaceCluster.unavailable().isPresent()) {
            throw new UserInputException("--namespaces builds hosts from network namespaces: "
                    + NamespaceCluster.unavailable().get());
        }
        if (compareMpi != null && !Files.isRegularFile(compareMpi.resolve("run.sh"))) {
            throw new UserInputException("--compare-mpi: expected a directory with run.sh (the mpi-collectives "
                    + "anchor), got " + compareMpi);
        }
        Files.createDirectories(out);
        MachineInfo machine = MachineInfo.current();
        PrintWriter log = spec.commandLine().getOut();
        // Rounds alternate attn4j's runs with Open MPI's and iperf3's, so a change in the machine's load during the
        // benchmark falls on both sides of a ratio rather than on one.
        List<List<Row>> roundRows = new ArrayList<>();
        List<List<MpiRow>> roundMpi = new ArrayList<>();
        for (int round = 1; round <= rounds; round++) {
            if (rounds > 1) {
                log.printf("round %d of %d%n", round, rounds);
                log.flush();
            }
            List<Row> rows = new ArrayList<>(run(2, "p2p", sizes(min, max, 2)));
            for (int p : ringWorkers) {
                rows.addAll(run(p, "ring", sizes(ringMin, ringMax, 4)));
            }
            List<MpiRow> mpi = new ArrayList<>(compareMpi == null ? List.of() : MpiRow.run(compareMpi, ringWorkers,
                    log));
            if (namespaces > 0) {
                rows.addAll(acrossNamespaces(sizes(ringMin, ringMax, 4), mpi));
            }
            roundRows.add(rows);
            roundMpi.add(mpi);
        }
        List<Row> rows = Row.medians(roundRows);
        List<MpiRow> mpi = MpiRow.medians(roundMpi);
        if (rounds > 1) {
            writeRoundsCsv(out.resolve(ROUNDS_CSV), roundRows, roundMpi);
        } else {
            Files.deleteIfExists(out.resolve(ROUNDS_CSV));               // not one of this run's files
        }
        writeCsv(out.resolve(CSV), rows, mpi);
        writeChart(out.resolve(PNG), rows);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION,
                markdown(rows, mpi, machine, command.strip()));
        log.printf("wrote %s, %s%s and the '%s' section of %s%n", out.resolve(CSV), out.resolve(PNG),
                rounds > 1 ? ", " + out.resolve(ROUNDS_CSV) : "", SECTION, out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    /** Runs {@code p} workers in {@code mode} and returns rank 0's results; their other lines go to the log. */
    private List<Row> run(int p, String mode, List<Long> sizes) throws IOException, InterruptedException {
        PrintWriter log = spec.commandLine().getOut();
        List<Row> rows = new CopyOnWriteArrayList<>();
        List<String> tail = new CopyOnWriteArrayList<>();
        String resultPrefix = "[rank 0] " + TransportBenchWorker.RESULT;
        LaunchResult r = LocalLauncher.builder(p, TransportBenchWorker.class.getName())
                .args(List.of(mode, sizes.stream().map(String::valueOf).collect(Collectors.joining(",")),
                        Integer.toString(repeats), Double.toString(warmUp)))
                .heap(heap).timeout(Duration.ofMinutes(30))
                .env(AeronTransportContext.ENV_IPC, path.equals("ipc") ? "1" : "0")
                .env(AeronTransportContext.ENV_NETWORK, path.equals("udp") ? "udp" : "tcp")
                .output(line -> {
                    if (line.startsWith(resultPrefix)) {
                        rows.add(Row.parse(line.substring(resultPrefix.length())));
                    } else {
                        synchronized (log) {
                            log.println(line);
                            log.flush();
                        }
                    }
                }, tail::add).build().run();
        if (!r.succeeded()) {
            throw new IllegalStateException("bench transport: the " + p + " " + mode + " workers failed (" + r
                    + "); their stderr:\n" + String.join("\n", tail));
        }
        return rows;
    }

    /**
     * The ring collectives across {@link #namespaces} network namespaces on a bridge (one worker each, TCP or UDP
     * between them, no rate limit), as rows of kind {@code ns-allgather} / {@code ns-reducescatter}, then iperf3's
     * TCP throughput ({@code iperf3} from the first namespace to the second, {@code iperf3-ring} per link of the
     * ring; GB/s in the bandwidth column) if iperf3 is installed, then, with {@code --compare-mpi}, Open MPI's
     * collectives across the same namespaces, added to {@code mpi}.
     */
    private List<Row> acrossNamespaces(List<Long> sizes, List<MpiRow> mpi) throws IOException, InterruptedException {
        PrintWriter log = spec.commandLine().getOut();
        List<Row> rows = new CopyOnWriteArrayList<>();
        List<String> tail = new CopyOnWriteArrayList<>();
        try (NamespaceCluster cluster = NamespaceCluster.create(namespaces, 0, linkMtu)) {
            LocalLauncher.Builder launch = LocalLauncher.builder(namespaces, TransportBenchWorker.class.getName());
            if (linkMtu > 0) {
                launch.env(AeronTransportContext.ENV_MTU, "link");          // datagrams as large as the links allow
            }
            launch.env(AeronTransportContext.ENV_NETWORK, network);
            // Each worker is alone in its namespace, but they all share this machine's cores: unless told otherwise,
            // they wait as ranks sharing one host would (the transport's rule for ranks per core).
            launch.env(AeronTransportContext.ENV_IDLE, namespaceIdle());
            LaunchResult r = launch.rendezvous(cluster.address(0), NAMESPACE_MASTER_PORT).prefix(cluster::prefix)
                    .args(List.of("ring", sizes.stream().map(String::valueOf).collect(Collectors.joining(",")),
                            Integer.toString(repeats), Double.toString(warmUp)))
                    .heap(heap).timeout(Duration.ofMinutes(30))
                    .output(line -> {
                        int mtuAt = line.indexOf(TransportBenchWorker.MTU);
                        if (mtuAt >= 0) {
                            namespaceUdpMtu = Integer.parseInt(line.substring(mtuAt + TransportBenchWorker.MTU.length())
                                    .trim());
                        }
                        int at = line.indexOf(TransportBenchWorker.RESULT);
                        if (at >= 0) {
                            Row row = Row.parse(line.substring(at + TransportBenchWorker.RESULT.length()));
                            rows.add(new Row("ns-" + row.kind(), row.workers(), row.bytes(), row.medianUs(),
                                    row.gbps(), row.busGbps(), row.p99Us()));
                        }
                    }, tail::add).build().run();
            if (!r.succeeded()) {
                throw new IllegalStateException("bench transport: the workers across " + namespaces
                        + " namespaces failed (" + r + "); their stderr:\n" + String.join("\n", tail));
            }
            List<Double> iperf = iperf3(cluster);
            if (iperf.isEmpty()) {
                log.println("iperf3 is not installed (Debian: apt-get install iperf3): no TCP baseline");
            } else {
                rows.add(new Row("iperf3", 2, 0, Double.NaN, iperf.get(0), Double.NaN, Double.NaN));
                rows.add(new Row("iperf3-ring", namespaces, 0, Double.NaN, iperf.get(1), Double.NaN, Double.NaN));
            }
            rows.addAll(bareRing(cluster, sizes, log));
            if (compareMpi != null) {
                mpi.addAll(MpiRow.acrossNamespaces(compareMpi, cluster, log));
            }
        }
        log.flush();
        return rows;
    }

    /** The bare ring's program, once compiled in this run; null before. */
    private Path bareRing;

    /**
     * The bare ring ({@code bare-ring.c}, built here with gcc) across the cluster at every size: all-gather and
     * reduce-scatter, without and with a CRC32C of every slice at both ends, as rows of kind {@code bare-allgather},
     * {@code bare-reducescatter}, {@code bare-crc-allgather}, {@code bare-crc-reducescatter}: how fast a ring
     * with nothing around it goes on these links and cores, against which to see what the transport's own work
     * costs. Empty without gcc.
     */
    private List<Row> bareRing(NamespaceCluster cluster, List<Long> sizes, PrintWriter log)
            throws IOException, InterruptedException {
        if (bareRing == null) {
            Path dir = Files.createTempDirectory("attn4j-bare-ring");
            dir.toFile().deleteOnExit();
            Path source = dir.resolve("bare-ring.c");
            try (var in = TransportBenchCommand.class.getResourceAsStream("bare-ring.c")) {
                Files.copy(in, source);
            }
            source.toFile().deleteOnExit();
            Path binary = dir.resolve("bare-ring");
            Process cc;
            try {
                cc = new ProcessBuilder("gcc", "-O2", "-march=native", "-o", binary.toString(), source.toString())
                        .redirectErrorStream(true).start();
            } catch (IOException e) {
                log.println("gcc is not installed: no bare ring beside the workers (" + e.getMessage() + ")");
                return List.of();
            }
            String output = new String(cc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (cc.waitFor() != 0) {
                log.println("gcc could not build the bare ring, so it is left out:\n" + output);
                return List.of();
            }
            binary.toFile().deleteOnExit();
            bareRing = binary;
        }
        int p = cluster.hosts();
        List<Row> rows = new ArrayList<>();
        for (long size : sizes) {
            if (size % (4L * p) != 0) {
                continue;                                  // whole float32 blocks only
            }
            for (boolean crc : new boolean[] {false, true}) {
                for (String op : List.of("allgather", "reducescatter")) {
                    double us = bareRingRun(cluster, size, op.equals("allgather") ? 0 : 1, crc) * 1e6;
                    double gbps = size / us / 1e3;
                    rows.add(new Row("bare-" + (crc ? "crc-" : "") + op, p, size, us, gbps, gbps * (p - 1) / p,
                            Double.NaN));
                }
            }
        }
        return rows;
    }

    private static final int BARE_RING_PORT = 29531;

    /** One run of the bare ring on every host: the median over {@link #repeats} calls of the slowest host's time, s. */
    private double bareRingRun(NamespaceCluster cluster, long size, int mode, boolean crc)
            throws IOException, InterruptedException {
        int p = cluster.hosts();
        List<Process> ranks = new ArrayList<>();
        List<CompletableFuture<String>> outputs = new ArrayList<>();
        try {
            for (int i = 0; i < p; i++) {
                List<String> cmd = new ArrayList<>(cluster.prefix(i));
                cmd.addAll(List.of(bareRing.toString(), Integer.toString(p), Integer.toString(i), Long.toString(size),
                        Integer.toString(mode), crc ? "1" : "0", Integer.toString(repeats),
                        cluster.address((i + 1) % p), Integer.toString(BARE_RING_PORT)));
                Process rank = new ProcessBuilder(cmd).redirectErrorStream(true).start();
                ranks.add(rank);
                outputs.add(CompletableFuture.supplyAsync(() -> {
                    try {
                        return new String(rank.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                    } catch (IOException e) {
                        throw new UncheckedIOException(e);
                    }
                }));
            }
            double[] slowest = new double[repeats];
            for (int i = 0; i < p; i++) {
                if (!ranks.get(i).waitFor(5, java.util.concurrent.TimeUnit.MINUTES)) {
                    throw new IllegalStateException("bench transport: the bare ring did not finish in 5 minutes");
                }
                String output = outputs.get(i).join();
                if (ranks.get(i).exitValue() != 0 || !output.startsWith("TIMES ")) {
                    throw new IllegalStateException("bench transport: the bare ring failed on host " + i + ": "
                            + output.strip());
                }
                String[] t = output.strip().substring("TIMES ".length()).split(" ");
                for (int r = 0; r < repeats; r++) {
                    slowest[r] = Math.max(slowest[r], Double.parseDouble(t[r]));
                }
            }
            return GemmRate.median(slowest);
        } finally {
            ranks.forEach(Process::destroyForcibly);
        }
    }

    /**
     * How the namespace workers' progress threads wait: ATTN4J_TRANSPORT_IDLE when set, else the transport's rule
     * for ranks sharing a host's cores (spin with two cores per rank, yield with one, park with fewer).
     */
    private String namespaceIdle() {
        String set = System.getenv(AeronTransportContext.ENV_IDLE);
        if (set != null && !set.isBlank()) {
            return set.trim().toLowerCase(Locale.ROOT);
        }
        int cores = Runtime.getRuntime().availableProcessors();
        return cores >= 2 * namespaces ? "spin" : cores >= namespaces ? "yield" : "park";
    }

    /**
     * iperf3's TCP throughput, 3 s per stream, GB/s: from namespace 0 to namespace 1 alone, then on every link of
     * the ring at once (namespace i to i + 1, the mean of the streams: what each link carries while all of them
     * share this machine's cores, as in a ring collective); empty without iperf3.
     */
    private static List<Double> iperf3(NamespaceCluster cluster) throws IOException, InterruptedException {
        if (!Files.isExecutable(Path.of(IPERF3))) {
            return List.of();
        }
        double pair = iperf3Streams(cluster, 1).get(0);
        double ring = iperf3Streams(cluster, cluster.hosts()).stream().mapToDouble(Double::doubleValue).average()
                .orElseThrow();
        return List.of(pair, ring);
    }

    private static final String IPERF3 = "/usr/bin/iperf3";
    /** The received throughput in iperf3's JSON report, bits per second. */
    private static final java.util.regex.Pattern IPERF3_RECEIVED = java.util.regex.Pattern.compile(
            "\"sum_received\"\\s*:\\s*\\{[^}]*\"bits_per_second\"\\s*:\\s*([0-9.eE+]+)");

    /** Streams from namespace i to i + 1 (mod hosts) for i below {@code streams}, all at once; GB/s each. */
    private static List<Double> iperf3Streams(NamespaceCluster cluster, int streams)
            throws IOException, InterruptedException {
        List<Process> servers = new ArrayList<>();
        try {
            for (int i = 0; i < streams; i++) {
                int to = (i + 1) % cluster.hosts();
                List<String> server = new ArrayList<>(cluster.prefix(to));
                server.addAll(List.of(IPERF3, "-s", "-1", "-B", cluster.address(to)));
                servers.add(new ProcessBuilder(server).redirectErrorStream(true)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD).start());
            }
            List<CompletableFuture<Double>> results = new ArrayList<>();
            for (int i = 0; i < streams; i++) {
                int from = i;
                results.add(CompletableFuture.supplyAsync(() -> iperf3Client(cluster, from)));
            }
            List<Double> gbps = new ArrayList<>();
            for (CompletableFuture<Double> r : results) {
                gbps.add(r.join());
            }
            return gbps;
        } finally {
            servers.forEach(Process::destroy);
        }
    }

    /** One 3 s iperf3 stream from namespace {@code from} to the next, GB/s received; retried until the server listens. */
    private static double iperf3Client(NamespaceCluster cluster, int from) {
        List<String> client = new ArrayList<>(cluster.prefix(from));
        client.addAll(List.of(IPERF3, "-c", cluster.address((from + 1) % cluster.hosts()), "-t", "3", "-J"));
        try {
            for (int attempt = 0; attempt < 20; attempt++) {
                Process c = new ProcessBuilder(client).redirectErrorStream(true).start();
                String json = new String(c.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                c.waitFor();
                java.util.regex.Matcher m = IPERF3_RECEIVED.matcher(json);
                if (c.exitValue() == 0 && m.find()) {
                    return Double.parseDouble(m.group(1)) / 8e9;
                }
                Thread.sleep(100);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("bench transport: interrupted while running iperf3", e);
        }
        throw new IllegalStateException("bench transport: iperf3 from namespace " + from + " gave no result");
    }

    /** From {@code min} to {@code max}, growing by {@code factor}; {@code max} is always the last. */
    static List<Long> sizes(long min, long max, int factor) {
        List<Long> s = new ArrayList<>();
        for (long b = min; b < max; b *= factor) {
            s.add(b);
        }
        s.add(max);
        return s;
    }

    /** Parses 4096, 4k, 64m, 1g (binary multiples). */
    static long bytes(String option, String text) {
        String t = text.strip().toLowerCase(Locale.ROOT);
        long unit = t.endsWith("k") ? 1L << 10 : t.endsWith("m") ? 1L << 20 : t.endsWith("g") ? 1L << 30 : 1;
        try {
            return Long.parseLong(unit == 1 ? t : t.substring(0, t.length() - 1)) * unit;
        } catch (NumberFormatException e) {
            throw new UserInputException(option + " must be a byte count such as 4096, 4k or 64m, got \"" + text
                    + "\"");
        }
    }

    private static String size(long bytes) {
        return bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? bytes / (1 << 20) + " MB"
                : bytes >= 1024 && bytes % 1024 == 0 ? bytes / 1024 + " KB" : bytes + " B";
    }

    private void writeCsv(Path file, List<Row> rows, List<MpiRow> mpi) throws IOException {
        Files.writeString(file, CSV_HEADER + "\n" + csvLines(rows, mpi), StandardCharsets.UTF_8);
    }

    /** Every round's lines, each led by its round (from 1). */
    private void writeRoundsCsv(Path file, List<List<Row>> rows, List<List<MpiRow>> mpi) throws IOException {
        StringBuilder b = new StringBuilder("round,").append(CSV_HEADER).append('\n');
        for (int i = 0; i < rows.size(); i++) {
            int round = i + 1;
            csvLines(rows.get(i), mpi.get(i)).lines().forEach(l -> b.append(round).append(',').append(l).append('\n'));
        }
        Files.writeString(file, b, StandardCharsets.UTF_8);
    }

    private String csvLines(List<Row> rows, List<MpiRow> mpi) {
        StringBuilder b = new StringBuilder();
        for (Row r : rows) {
            String source = r.kind().startsWith("iperf3") ? "iperf3" : r.kind().startsWith("bare-") ? "bare-ring"
                    : r.kind().startsWith("ns-") ? "attn4j-" + network : "attn4j-" + path;
            b.append(String.format(Locale.ROOT, "%s,%s,%d,%d,%s,%.4f,%s,%s%n", source, r.kind(), r.workers(),
                    r.bytes(), optional(r.medianUs(), "%.3f"), r.gbps(), optional(r.busGbps(), "%.4f"),
                    optional(r.p99Us(), "%.3f")));
        }
        for (MpiRow r : mpi) {
            b.append(String.format(Locale.ROOT, "openmpi-tcp,%s,%d,%d,%.3f,,%s,%n", r.kind(), r.workers(), r.bytes(),
                    r.medianUs(), r.kind().equals("p2p-latency") ? "" : String.format(Locale.ROOT, "%.4f",
                            r.busGbps())));
        }
        return b.toString();
    }

    private static String optional(double v, String format) {
        return Double.isNaN(v) ? "" : String.format(Locale.ROOT, format, v);
    }

    private void writeChart(Path file, List<Row> rows) throws IOException {
        XYChart chart = new XYChartBuilder().width(1000).height(650)
                .title("Aeron transport between worker processes (" + (path.equals("ipc") ? "IPC" : path.toUpperCase(Locale.ROOT) + " loopback")
                        + "), float32")
                .xAxisTitle("message / collective size (log scale)").yAxisTitle("GB/s").build();
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
        chart.setCustomXAxisTickLabelsFormatter(log2 -> Math.abs(log2 - Math.rint(log2)) > 1e-9 ? ""
                : size(1L << Math.round(log2)));
        series(chart, rows, "p2p-bandwidth", 2, "point-to-point bandwidth, 2 workers", new Color(0x1f77b4), false);
        Color[] gather = {new Color(0x2ca02c), new Color(0x006d2c)};
        Color[] scatter = {new Color(0xd62728), new Color(0x67000d)};
        for (int i = 0; i < ringWorkers.size(); i++) {
            int p = ringWorkers.get(i);
            series(chart, rows, "allgather", p, "ring all-gather bus bandwidth, " + p + " workers",
                    gather[i % 2], true);
            series(chart, rows, "reducescatter", p, "ring reduce-scatter bus bandwidth, " + p + " workers",
                    scatter[i % 2], true);
        }
        String path = file.toString();
        BitmapEncoder.saveBitmap(chart, path.substring(0, path.length() - 4), BitmapEncoder.BitmapFormat.PNG);
    }

    private static void series(XYChart chart, List<Row> rows, String kind, int p, String name, Color color,
                               boolean bus) {
        List<Double> x = new ArrayList<>();
        List<Double> y = new ArrayList<>();
        for (Row r : rows) {
            if (r.kind().equals(kind) && r.workers() == p) {
                x.add(Math.log(r.bytes()) / Math.log(2));
                y.add(bus ? r.busGbps() : r.gbps());
            }
        }
        if (!x.isEmpty()) {
            XYSeries s = chart.addSeries(name, x, y);
            s.setLineColor(color);
            s.setMarkerColor(color);
            s.setMarker(bus ? SeriesMarkers.DIAMOND : SeriesMarkers.CIRCLE);
        }
    }

    /** Whether the environment variable {@code name} holds one of {@code values}. */
    private static boolean flagSet(String name, String... values) {
        String v = System.getenv(name);
        return v != null && java.util.Arrays.asList(values).contains(v.trim().toLowerCase(java.util.Locale.ROOT));
    }

    private String markdown(List<Row> rows, List<MpiRow> mpi, MachineInfo m, String command) {
        // Single copy is on unless the environment the workers inherit turns it (or it with IPC checksums) off.
        boolean singleCopy = !flagSet(AeronTransportContext.ENV_SINGLE_COPY, "0", "false", "off")
                && !flagSet(AeronTransportContext.ENV_IPC_CHECKSUMS, "1", "true", "on");
        String how = path.equals("ipc") ? "through Aeron IPC (one media driver for the job on this machine, "
                + (singleCopy ? "shared-memory logs for arrays under 64 KiB; larger ones the receiver copies once, "
                + "straight from the sender's memory)" : "shared-memory logs)") : path.equals("udp") ? "over UDP loopback (a media driver each, as between hosts)"
                : "over TCP loopback (one connection per direction and pair, as between hosts)";
        StringBuilder b = new StringBuilder(MarkdownSection.opening("Transport: Aeron between worker processes",
                command, m, "Worker JVMs on this machine send float32 arrays to each other " + how + "; GB = 10^9 "
                        + "bytes. Latency is half the round trip of one array sent and sent back, its median and 99th "
                        + "percentile over at least 200 round trips; bandwidth streams 4 to 64 MB of arrays back to "
                        + "back and waits for a one-element acknowledgement, one way and both ways at once (each "
                        + "rank sending while it receives, as in a ring step; figure per direction), the median of "
                        + repeats + " timed runs. Untimed calls run first (the JIT compiles the paths a size takes only "
                        + "after hundreds of its calls): ping-pongs before the point-to-point sizes (and untimed rounds "
                        + "before each); all-gathers and reduce-scatters of every ring size in turn before the first, "
                        + "then of each size before it (and three calls more), each for at least " + warmUp
                        + " s and then on until no worker's JIT compiler took more than 2 % of the last second (at "
                        + "most " + ClusterBenchCommand.fmt(10 * warmUp) + " s: with four workers on two cores the "
                        + "compilers kept busy for a minute). For the ring collectives, size is the whole array (what "
                        + "every worker ends with after an all-gather, and starts with before a reduce-scatter), time "
                        + "is the slowest worker's median of " + repeats + ", and bus bandwidth is size / time x "
                        + "(P - 1) / P, as nccl-tests define it. The workers share the machine's cores."
                        + roundsNote(rows, mpi)
                        + (mpi.isEmpty() ? "" : " Open MPI's columns come from the mpi-collectives anchor (Open MPI "
                        + "over TCP loopback, `--mca btl tcp,self`), run right after on the same machine; its "
                        + "latency is a ping-pong's half round trip too.")));
        b.append(mpi.isEmpty() ? "| size | latency p50 | latency p99 | bandwidth | both ways |\n|---:|---:|---:|---:|---:|\n"
                : "| size | latency p50 | latency p99 | Open MPI latency | bandwidth | both ways |\n"
                + "|---:|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            if (r.kind().equals("p2p-latency")) {
                b.append(String.format(Locale.ROOT, "| %s | %.0f µs | %.0f µs |", size(r.bytes()), r.medianUs(),
                        r.p99Us()));
                if (!mpi.isEmpty()) {
                    b.append(' ').append(mpi.stream().filter(x -> x.kind().equals("p2p-latency")
                            && x.bytes() == r.bytes()).findFirst().map(x -> String.format(Locale.ROOT, "%.1f µs",
                            x.medianUs())).orElse("")).append(" |");
                }
                b.append(' ').append(gbps(rows, "p2p-bandwidth", r.bytes())).append(" | ")
                        .append(gbps(rows, "p2p-both", r.bytes())).append(" |\n");
            }
        }
        b.append(mpi.isEmpty() ? "\n| workers | size | all-gather | bus bandwidth | reduce-scatter | bus bandwidth |\n"
                + "|---:|---:|---:|---:|---:|---:|\n"
                : "\n| workers | size | all-gather | bus bandwidth | Open MPI | reduce-scatter | bus bandwidth "
                + "| Open MPI |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            if (r.kind().equals("allgather")) {
                Optional<Row> rs = rows.stream().filter(x -> x.kind().equals("reducescatter")
                        && x.workers() == r.workers() && x.bytes() == r.bytes()).findFirst();
                b.append(String.format(Locale.ROOT, "| %d | %s | %.2f ms | %.3f GB/s |", r.workers(),
                        size(r.bytes()), r.medianUs() / 1e3, r.busGbps()));
                if (!mpi.isEmpty()) {
                    b.append(' ').append(mpiBus(mpi, "allgather", r.workers(), r.bytes())).append(" |");
                }
                b.append(' ').append(rs.map(x -> String.format(Locale.ROOT, "%.2f ms", x.medianUs() / 1e3))
                        .orElse("")).append(" | ").append(rs.map(x -> String.format(Locale.ROOT, "%.3f GB/s",
                        x.busGbps())).orElse("")).append(" |");
                if (!mpi.isEmpty()) {
                    b.append(' ').append(mpiBus(mpi, "reducescatter", r.workers(), r.bytes())).append(" |");
                }
                b.append('\n');
            }
        }
        if (rows.stream().anyMatch(r -> r.kind().startsWith("ns-"))) {
            Optional<Row> iperf = rows.stream().filter(r -> r.kind().equals("iperf3")).findFirst();
            Optional<Row> ring = rows.stream().filter(r -> r.kind().equals("iperf3-ring")).findFirst();
            boolean nsMpi = mpi.stream().anyMatch(x -> x.kind().startsWith("ns-"));
            b.append("\nAcross ").append(namespaces).append(" network namespaces on a bridge (one worker each, ")
                    .append(network.equals("udp") ? "UDP between them through a media driver each" : "TCP between them")
                    .append(", veth links of MTU ").append(linkMtu > 0 ? linkMtu : 1500)
                    .append(" without a rate limit, all on this machine's cores, progress threads set to ")
                    .append(namespaceIdle())
                    .append(network.equals("udp") ? "; UDP datagrams of up to " + namespaceUdpMtu + " bytes)" : ")")
                    .append(iperf.map(r -> String.format(Locale.ROOT, "; iperf3 (TCP, 3 s) from the first to the "
                            + "second alone: %.3f GB/s", r.gbps())).orElse(""))
                    .append(ring.map(r -> String.format(Locale.ROOT, ", and per link with every link of the ring "
                            + "sending at once: %.3f GB/s", r.gbps())).orElse(""))
                    .append(nsMpi ? "; Open MPI's columns: the anchor's program with one rank in each namespace, over "
                            + "TCP (`--mca btl tcp,self`), its ranks yielding while they wait (`mpi_yield_when_idle`) "
                            + "as on one machine with more ranks than cores" : "").append(":\n\n")
                    .append("| workers | size | all-gather bus bandwidth |" + (nsMpi ? " Open MPI |" : "")
                            + " reduce-scatter bus bandwidth |" + (nsMpi ? " Open MPI |" : "")
                            + (iperf.isPresent() ? " all-gather / iperf3 alone | all-gather / iperf3 ring |" : "")
                            + (ring.isPresent() ? " reduce-scatter / iperf3 ring |" : "")
                            + (nsMpi && ring.isPresent() ? " Open MPI / iperf3 ring (all-gather, reduce-scatter) |"
                            : "")
                            + "\n|---:|---:|---:|" + (nsMpi ? "---:|" : "") + "---:|" + (nsMpi ? "---:|" : "")
                            + (iperf.isPresent() ? "---:|---:|" : "") + (ring.isPresent() ? "---:|" : "")
                            + (nsMpi && ring.isPresent() ? "---:|" : "") + "\n");
            for (Row r : rows) {
                if (r.kind().equals("ns-allgather")) {
                    Optional<Row> rs = rows.stream().filter(x -> x.kind().equals("ns-reducescatter")
                            && x.bytes() == r.bytes()).findFirst();
                    Optional<MpiRow> mpiGather = mpiRow(mpi, "ns-allgather", r.workers(), r.bytes());
                    Optional<MpiRow> mpiScatter = mpiRow(mpi, "ns-reducescatter", r.workers(), r.bytes());
                    b.append(String.format(Locale.ROOT, "| %d | %s | %.3f GB/s |", r.workers(), size(r.bytes()),
                            r.busGbps()));
                    if (nsMpi) {
                        b.append(' ').append(mpiGather.map(x -> String.format(Locale.ROOT, "%.3f GB/s", x.busGbps()))
                                .orElse("")).append(" |");
                    }
                    b.append(' ').append(rs.map(x -> String.format(Locale.ROOT, "%.3f GB/s", x.busGbps())).orElse(""))
                            .append(" |");
                    if (nsMpi) {
                        b.append(' ').append(mpiScatter.map(x -> String.format(Locale.ROOT, "%.3f GB/s",
                                x.busGbps())).orElse("")).append(" |");
                    }
                    iperf.ifPresent(i -> b.append(String.format(Locale.ROOT, " %.2f |", r.busGbps() / i.gbps())));
                    ring.ifPresent(i -> b.append(String.format(Locale.ROOT, " %.2f |", r.busGbps() / i.gbps())));
                    ring.ifPresent(i -> b.append(rs.map(x -> String.format(Locale.ROOT, " %.2f |",
                            x.busGbps() / i.gbps())).orElse(" |")));
                    if (nsMpi) {
                        ring.ifPresent(i -> b.append(String.format(Locale.ROOT, " %s, %s |",
                                mpiGather.map(x -> String.format(Locale.ROOT, "%.2f", x.busGbps() / i.gbps()))
                                        .orElse("-"),
                                mpiScatter.map(x -> String.format(Locale.ROOT, "%.2f", x.busGbps() / i.gbps()))
                                        .orElse("-"))));
                    }
                    b.append('\n');
                }
            }
            bareRingTable(b, rows, ring);
        }
        Optional<Row> p2p = rows.stream().filter(r -> r.kind().equals("p2p-bandwidth") && r.bytes() == P2P_SIZE)
                .findFirst();
        b.append('\n').append(p2p.map(r -> String.format(Locale.ROOT, "Point-to-point bandwidth at 16 MB messages: "
                + "%.2f GB/s %s.%n%n", r.gbps(), path.equals("ipc") ? "over IPC" : "over " + path.toUpperCase(Locale.ROOT) + " loopback")).orElse(""));
        b.append("![transport](").append(PNG).append(")\n");
        return b.toString();
    }

    /** The bare ring's kinds in the order of its table's columns. */
    private static final List<String> BARE_TABLE_KINDS = List.of("bare-allgather", "bare-crc-allgather",
            "bare-reducescatter", "bare-crc-reducescatter");

    /** The bare ring's rows beside iperf3's ring, if it ran. */
    private static void bareRingTable(StringBuilder b, List<Row> rows, Optional<Row> ring) {
        if (rows.stream().noneMatch(r -> r.kind().startsWith("bare-"))) {
            return;
        }
        b.append("\nThe bare ring across the same namespaces: a ring in C over TCP with no transport around it (one "
                + "thread per host polling its two sockets, slices of 1 MiB forwarded as they arrive, received "
                + "straight into the output or added into the partial sums, no framing; `bare-ring.c` beside this "
                + "benchmark's code, built here with gcc), alone and with a CRC32C of every slice at both ends as the "
                + "transport checks them. It shows how much of iperf3's throughput a ring keeps on these cores once "
                + "it reads and writes its arrays, before any transport adds its own work:\n\n")
                .append("| workers | size | all-gather bus bandwidth | with CRC32C | reduce-scatter bus bandwidth "
                        + "| with CRC32C |" + (ring.isPresent() ? " / iperf3 ring (the four columns) |" : "")
                        + "\n|---:|---:|---:|---:|---:|---:|" + (ring.isPresent() ? "---:|" : "") + "\n");
        for (Row r : rows) {
            if (r.kind().equals("bare-allgather")) {
                double[] bus = BARE_TABLE_KINDS.stream().mapToDouble(kind -> rows.stream()
                        .filter(x -> x.kind().equals(kind) && x.bytes() == r.bytes())
                        .mapToDouble(Row::busGbps).findFirst().orElse(Double.NaN)).toArray();
                b.append(String.format(Locale.ROOT, "| %d | %s | %.3f GB/s | %.3f GB/s | %.3f GB/s | %.3f GB/s |",
                        r.workers(), size(r.bytes()), bus[0], bus[1], bus[2], bus[3]));
                ring.ifPresent(i -> b.append(String.format(Locale.ROOT, " %.2f, %.2f, %.2f, %.2f |",
                        bus[0] / i.gbps(), bus[1] / i.gbps(), bus[2] / i.gbps(), bus[3] / i.gbps())));
                b.append('\n');
            }
        }
    }

    /** How the rounds were run and summed up, for the method paragraph; empty for one round. */
    private String roundsNote(List<Row> rows, List<MpiRow> mpi) {
        if (rounds == 1) {
            return "";
        }
        List<String> others = new ArrayList<>();
        if (!mpi.isEmpty()) {
            others.add("Open MPI's");
        }
        if (rows.stream().anyMatch(r -> r.kind().startsWith("iperf3"))) {
            others.add("iperf3's");
        }
        if (rows.stream().anyMatch(r -> r.kind().startsWith("bare-"))) {
            others.add("the bare ring's");
        }
        String alternating = others.size() < 3 ? String.join(" and ", others)
                : String.join(", ", others.subList(0, others.size() - 1)) + " and " + others.get(others.size() - 1);
        return " The whole measurement ran " + rounds + " times" + (others.isEmpty() ? ""
                : ", attn4j's runs alternating with " + alternating) + "; every figure below is its "
                + "median over the " + rounds + " rounds, and each ratio is of those medians (each round's figures: "
                + ROUNDS_CSV + ").";
    }

    private static String gbps(List<Row> rows, String kind, long bytes) {
        return rows.stream().filter(x -> x.kind().equals(kind) && x.bytes() == bytes).findFirst()
                .map(x -> String.format(Locale.ROOT, "%.3f GB/s", x.gbps())).orElse("");
    }

    private static String mpiBus(List<MpiRow> mpi, String kind, int workers, long bytes) {
        return mpiRow(mpi, kind, workers, bytes).map(x -> String.format(Locale.ROOT, "%.3f GB/s", x.busGbps()))
                .orElse("");
    }

    private static Optional<MpiRow> mpiRow(List<MpiRow> mpi, String kind, int workers, long bytes) {
        // Open MPI's sizes are powers of two; ours are rounded down to a multiple of P floats.
        return mpi.stream().filter(x -> x.kind().equals(kind) && x.workers() == workers
                && Math.abs(x.bytes() - bytes) <= 4L * workers).findFirst();
    }
}
