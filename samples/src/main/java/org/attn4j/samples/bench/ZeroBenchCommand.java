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
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench zero}: what ZeRO saves per worker, measured. For each ZeRO stage and each W, starts W worker
 * processes ({@link ZeroBenchWorker}) that train a GPT-like model sequence-parallel for a few Adam steps and then
 * read the off-heap memory their process holds. Writes {@code bench-zero.csv} (the trainer's counts of what each
 * stage keeps by design beside the measured bytes, and the measured bytes of the one-worker run of the same stage)
 * and the {@code zero} section of {@code benchmarks.md}.
 */
@Command(name = "zero", mixinStandardHelpOptions = true,
        description = {"Off-heap memory per worker under ZeRO stages 0-3, measured in worker processes.",
            "Writes OUT/bench-zero.csv and a section of OUT/benchmarks.md."})
public final class ZeroBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-zero.csv";
    static final String SECTION = "zero";
    static final String HEADER = "workers,zero_stage,params,optimizer_state_bytes,gradient_bytes,"
            + "current_parameter_bytes,measured_offheap_bytes,measured_offheap_bytes_w1,"
            + "measured_offheap_bytes_after_fit,step_us";
    /** Each worker's Java heap: small, fixed and pre-touched, so the off-heap reading subtracts it exactly. */
    static final String HEAP = "256m";
    /**
     * The workers' allocator: two glibc arenas, every block of 1 MiB or more its own mapping (returned to the system
     * when freed), no transparent huge pages; so what the reading sees is what the worker holds rather than the
     * allocator's slack (by default a worker read up to 30 MB apart from its peers, in arena heaps glibc keeps).
     */
    static final String GLIBC_TUNABLES = "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=1048576";

    @Option(names = "--workers", paramLabel = "W", split = ",", defaultValue = "1,2,4",
            description = "Worker counts (default: ${DEFAULT-VALUE}; W = 1 always runs, as the reference).")
    List<Integer> workers;

    @Option(names = "--width", paramLabel = "WIDTH", defaultValue = "1536",
            description = "Model width (default: ${DEFAULT-VALUE}).")
    int width;

    @Option(names = "--blocks", paramLabel = "BLOCKS", defaultValue = "2",
            description = "Blocks (default: ${DEFAULT-VALUE}).")
    int blocks;

    @Option(names = "--steps", paramLabel = "STEPS", defaultValue = "10",
            description = "Adam steps before reading (default: "
            + "${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--jobs", paramLabel = "J", defaultValue = "1",
            description = "Launches measured at once (each process reads only its own memory; more jobs need more "
                    + "memory and finish sooner; default: ${DEFAULT-VALUE}).")
    int jobs;

    @Option(names = "--readings", paramLabel = "R", defaultValue = "6",
            description = "Memory readings per point, a second apart; the least counts (default: ${DEFAULT-VALUE}).")
    int readings;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    /** The settings of one measurement. */
    record Setup(int width, int blocks, int steps, int batch, int length, int readings) {
        List<String> args(ZeroStage stage) {
            return List.of(Integer.toString(stage.stage()), Integer.toString(steps), Integer.toString(width),
                    Integer.toString(blocks), Integer.toString(batch), Integer.toString(length),
                    Integer.toString(readings));
        }
    }

    /**
     * One worker count and stage. The counts are the largest worker's (slices differ by at most one element); the
     * measured bytes (between steps, and after {@code fit} returned) are the median worker's, with the largest
     * beside them for between steps (the median is not moved by one worker whose JVM happens to hold more of its
     * own memory when read).
     */
    record Row(int workers, int stage, long params, long stateBytes, long gradientBytes, long paramBytes,
               long measuredBytes, long largestMeasuredBytes, long afterFitBytes, long stepUs) {
        /** A worker's {@code RESULT} line. */
        static Row parse(String csv) {
            String[] f = csv.strip().split(",");
            long measured = Long.parseLong(f[6]);
            return new Row(Integer.parseInt(f[0]), Integer.parseInt(f[1]), Long.parseLong(f[2]),
                    Long.parseLong(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]), measured, measured,
                    Long.parseLong(f[7]), Long.parseLong(f[8]));
        }

        /** The row of a run from its workers' rows. */
        static Row of(List<Row> workers) {
            Row first = workers.get(0);
            long[] measured = workers.stream().mapToLong(Row::measuredBytes).sorted().toArray();
            return new Row(first.workers(), first.stage(), first.params(),
                    workers.stream().mapToLong(Row::stateBytes).max().orElseThrow(),
                    workers.stream().mapToLong(Row::gradientBytes).max().orElseThrow(),
                    workers.stream().mapToLong(Row::paramBytes).max().orElseThrow(),
                    median(measured), measured[measured.length - 1],
                    median(workers.stream().mapToLong(Row::afterFitBytes).sorted().toArray()),
                    workers.stream().mapToLong(Row::stepUs).max().orElseThrow());
        }

        private static long median(long[] sorted) {
            int n = sorted.length;
            return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        }
    }

    @Override
    public Integer call() throws Exception {
        Options.outputDirectory("--out", out);
        List<Integer> ws = new ArrayList<>(List.of(1));
        for (int w : workers) {
            if (w < 1 || w > 8) {
                throw new UserInputException("--workers must be in [1, 8], got " + w);
            }
            if (!ws.contains(w)) {
                ws.add(w);
            }
        }
        if (width < 8 || width % 8 != 0 || blocks < 1 || steps < 1 || readings < 1) {
            throw new UserInputException("--width must be a positive multiple of 8 (the model's 8 heads), --blocks, "
                    + "--steps and --readings at least 1; got " + width + ", " + blocks + ", " + steps + ", "
                    + readings);
        }
        Setup setup = new Setup(width, blocks, steps, 2, 32, readings);
        if (jobs < 1) {
            throw new UserInputException("--jobs must be >= 1, got " + jobs);
        }
        PrintWriter log = spec.commandLine().getOut();
        List<java.util.concurrent.Callable<Row>> points = new ArrayList<>();
        for (ZeroStage z : ZeroStage.values()) {
            for (int w : ws) {
                points.add(() -> {
                    Row r = measure(w, z, setup);
                    synchronized (log) {
                        log.printf(Locale.ROOT, "W=%d stage %d: %.1f MB off-heap per worker%n", w, z.stage(),
                                r.measuredBytes() / 1e6);
                        log.flush();
                    }
                    return r;
                });
            }
        }
        List<Row> rows = new ArrayList<>();
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(jobs);
        try {
            for (java.util.concurrent.Future<Row> f : pool.invokeAll(points)) {
                try {
                    rows.add(f.get());
                } catch (java.util.concurrent.ExecutionException e) {
                    throw e.getCause() instanceof Exception cause ? cause : e;
                }
            }
        } finally {
            pool.shutdownNow();
        }
        Files.createDirectories(out);
        StringBuilder csv = new StringBuilder(HEADER).append('\n');
        for (Row r : rows) {
            csv.append(String.format(Locale.ROOT, "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d%n", r.workers(), r.stage(),
                    r.params(), r.stateBytes(), r.gradientBytes(), r.paramBytes(), r.measuredBytes(),
                    oneWorker(rows, r), r.afterFitBytes(), r.stepUs()));
        }
        Files.writeString(out.resolve(CSV), csv, StandardCharsets.UTF_8);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION, markdown(rows, setup,
                command.strip()));
        log.printf("wrote %s and the '%s' section of %s%n", out.resolve(CSV), SECTION,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    private static long oneWorker(List<Row> rows, Row r) {
        return rows.stream().filter(x -> x.workers() == 1 && x.stage() == r.stage()).findFirst().orElseThrow()
                .measuredBytes();
    }

    /**
     * Trains on {@code w} worker processes at {@code stage} and reads their memory.
     *
     * @throws IllegalStateException naming the failure if a worker fails
     */
    static Row measure(int w, ZeroStage stage, Setup setup) throws IOException, InterruptedException {
        List<Row> ranks = new CopyOnWriteArrayList<>();
        List<String> tail = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(w, ZeroBenchWorker.class.getName())
                .args(setup.args(stage)).heap(HEAP)
                .jvmArgs(List.of("-Xms" + HEAP, "-XX:+AlwaysPreTouch"))
                .env("GLIBC_TUNABLES", GLIBC_TUNABLES)
                .timeout(Duration.ofMinutes(20))
                .output(line -> {
                    int at = line.indexOf(ZeroBenchWorker.RESULT);
                    if (at >= 0) {
                        ranks.add(Row.parse(line.substring(at + ZeroBenchWorker.RESULT.length())));
                    }
                }, tail::add).build().run();
        if (!r.succeeded() || ranks.size() != w) {
            throw new IllegalStateException("bench zero: " + w + " workers at stage " + stage.stage() + " failed ("
                    + r + "); their stderr:\n" + String.join("\n", tail));
        }
        return Row.of(ranks);
    }

    private static String markdown(List<Row> rows, Setup s, String command) {
        Row first = rows.get(0);
        double mb = 1e6;
        long p = first.params();
        StringBuilder b = new StringBuilder(MarkdownSection.opening("ZeRO: memory per worker", command,
                MachineInfo.current(), String.format(Locale.ROOT, "A GPT-like model (width %d, %d blocks, float32, "
                + "Adam, %d parameters: %.0f MB of parameters, as much gradient and twice that of Adam state) "
                + "trains one epoch (`fit(iterator)`) of %d steps on batches of %d x %d tokens in W worker processes "
                + "over Aeron, with sequence-parallel ring attention. *Off-heap at rest* is read on every worker "
                + "between steps (after the last step, when the epoch asks its data for more), once all are there, "
                + "and again after `fit` has returned with the network whole (every public `fit` gathers the "
                + "parameters at its end, so stage 3 keeps only its slice between the steps of an epoch): each the "
                + "least of %d readings a second apart, each after a garbage collection, "
                + "of the process's resident anonymous memory (`RssAnon`) minus its Java heap, which is fixed and "
                + "pre-touched; ND4J keeps its arrays there, where no ND4J or JavaCPP counter sees them. The workers "
                + "run with two glibc arenas and every block of 1 MiB or more mapped on its own (`GLIBC_TUNABLES=%s`) "
                + "so allocator slack does not blur the reading. *Kept by design* is the trainer's own count of the "
                + "optimizer state, gradient and parameter bytes it keeps between steps. *Step* is the slowest "
                + "worker's median time of a training step (forward, backward, the gradient and parameter "
                + "collectives of its stage, the Adam update) after the first; the workers share the machine's "
                + "cores, so it shows the cost of a stage's communication, not its scaling.", s.width(), s.blocks(), p,
                p * 4 / mb, s.steps(), s.batch(), s.length(), s.readings(), GLIBC_TUNABLES)));
        b.append("| W | stage | off-heap at rest between steps: median worker (largest) | same stage, W = 1 | "
                + "after fit returned: median worker | kept by design: state / gradient / parameters | step |\n"
                + "|---:|---:|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "| %d | %d | %.0f MB (%.0f) | %.0f MB | %.0f MB | %.0f / %.0f / %.0f "
                    + "MB | %.0f ms |%n", r.workers(), r.stage(), r.measuredBytes() / mb, r.largestMeasuredBytes() / mb,
                    oneWorker(rows, r) / mb, r.afterFitBytes() / mb, r.stateBytes() / mb, r.gradientBytes() / mb,
                    r.paramBytes() / mb, r.stepUs() / 1e3));
        }
        return b.toString();
    }
}
