package org.attn4j.samples.check;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.function.Consumer;
import java.util.function.Supplier;

import org.attn4j.distributed.launch.JobEnvironment;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.samples.JobRank;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.io.Npy;
import org.attn4j.samples.metrics.PeakMemory;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.SerializationFeature;
import org.nd4j.shade.jackson.databind.node.ArrayNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j check}: runs one algorithm's forward and backward pass on arrays from {@code .npy} files
 * and writes its results, so they can be compared with a reference computed elsewhere.
 *
 * <p>Reads {@code IN/q.npy [B,H,N,D]}, {@code IN/k.npy}, {@code IN/v.npy [B,Hkv,N,D]} and
 * {@code IN/do.npy [B,H,N,D]} (float32 or float64, computed in that type), and {@code IN/segments.npy [B,N]} if
 * present (document ids, packed sequences); writes {@code OUT/o.npy},
 * {@code OUT/lse.npy [B,H,N]} (softmax algorithms only), {@code OUT/dq.npy}, {@code OUT/dk.npy},
 * {@code OUT/dv.npy} in the same type, and {@code OUT/stats.json} with timings, peak memory and the bytes
 * each rank sent.
 *
 * <p>With {@code --workers P} a sequence-parallel algorithm runs in P local worker processes. Started by a
 * scheduler instead (torchrun's, Slurm's, MPI's or a Kubernetes indexed Job's variables with MASTER_ADDR, see
 * {@link JobEnvironment}), the command is one rank of that job: every rank reads the same inputs, and rank 0
 * writes the outputs and the stats of every rank.
 */
@Command(name = "check", mixinStandardHelpOptions = true,
        description = {"Run an attention algorithm on .npy inputs and write its outputs, gradients and stats.",
            "IN holds q.npy [B,H,N,D], k.npy and v.npy [B,Hkv,N,D], do.npy [B,H,N,D] (float32 or float64), and "
                + "optionally segments.npy [B,N] (int32 or int64): the document of every position, attention only "
                + "within a document, negative = padding (missing: one document per sequence).",
            "OUT receives o.npy, lse.npy [B,H,N] (softmax only), dq.npy, dk.npy, dv.npy and stats.json."})
public final class CheckCommand implements Callable<Integer> {

    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    @Option(names = "--algo", paramLabel = "NAME", defaultValue = "flash",
            converter = CheckAlgorithm.Converter.class, completionCandidates = CheckAlgorithm.Names.class,
            description = "Algorithm: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}).")
    CheckAlgorithm algo;

    @Option(names = "--in", paramLabel = "DIR", required = true, description = "Directory with the inputs.")
    Path in;

    @Option(names = "--out", paramLabel = "DIR", required = true,
            description = "Directory for the outputs (created if missing; files are replaced).")
    Path out;

    @Option(names = "--causal", description = "Causal mask: query i sees keys j <= i.")
    boolean causal;

    @Option(names = "--window", paramLabel = "W", defaultValue = "0",
            description = "Sliding window width, 0 for none (default: ${DEFAULT-VALUE}).")
    int window;

    @Option(names = "--scale", paramLabel = "S", description = "Score scale (default: 1/sqrt(D)); softmax only.")
    Double scale;

    @Option(names = "--decay", paramLabel = "L",
            description = "Decay rate lambda in (0, 1] of --algo linear and lasp (default: 1, no decay).")
    Double decay;

    @Option(names = "--workers", paramLabel = "P", defaultValue = "1",
            description = "Worker processes of a sequence-parallel algorithm (default: ${DEFAULT-VALUE}).")
    int workers;

    @Option(names = "--team", paramLabel = "C",
            description = "WallFacer's team size C; C^2 must divide P (default: the largest such C).")
    Integer team;

    @Option(names = "--layout", paramLabel = "L",
            description = "Sequence layout of the workers' shards: contiguous, zigzag or striped (default: the "
                    + "algorithm's own, e.g. zigzag for causal ring, striped for attention2d).")
    SequenceLayout layout;

    @Option(names = "--worker-heap", paramLabel = "SIZE", defaultValue = "2g",
            description = "Java heap per worker process (default: ${DEFAULT-VALUE}).")
    String workerHeap;

    @Option(names = "--timeout", paramLabel = "S", defaultValue = "600",
            description = "Stop the workers after S seconds (default: ${DEFAULT-VALUE}).")
    double timeout;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        Options.heap("--worker-heap", workerHeap);
        if (window < 0) {
            throw new UserInputException("--window must be >= 0 (0 = none), got " + window);
        }
        if (scale != null && !(Double.isFinite(scale) && scale > 0)) {
            throw new UserInputException("--scale must be a finite positive number, got " + scale);
        }
        if (Files.exists(out) && !Files.isDirectory(out)) {
            throw new UserInputException("--out " + out + " exists and is not a directory");
        }
        Optional<JobEnvironment> job = JobRank.detect(spec, workers);
        if (job.isPresent()) {
            if (algo.sequence() == null) {
                throw new UserInputException("--algo " + algo.cliName() + " runs in one process; a " + job.get()
                        .launcher() + " job of " + job.get().worldSize() + " ranks needs a sequence-parallel "
                        + "algorithm (" + sequenceNames() + ")");
            }
            workers = job.get().worldSize();
        }
        checkOptionsFitAlgorithm();
        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        CheckProblem problem = CheckInputs.load(in, mask, scale, decay == null ? 1.0 : decay);

        CheckableAlgorithm algorithm = algo.sequence() == null ? algo.create()
                : new DistributedCheck(algo.sequence(), in, workers, algorithmOptions(), layout, workerHeap,
                        Duration.ofMillis(Math.round(timeout * 1000)), line(spec.commandLine().getOut()),
                        line(spec.commandLine().getErr()), job.isPresent());
        PeakMemory.collectGarbage();
        PeakMemory memory = PeakMemory.start();
        long t0 = System.nanoTime();
        AttentionOutput forward = refusingBadInput(() -> algorithm.forward(problem));
        long t1 = System.nanoTime();
        AttentionGradients gradients = refusingBadInput(() -> algorithm.backward(problem, forward));
        long t2 = System.nanoTime();
        PeakMemory.Reading peak = memory.stop();
        if (algorithm instanceof DistributedCheck d && !d.leader()) {
            return 0;                                         // rank 0 of the job writes the results
        }

        DataType type = problem.q().dataType();
        long[] q = problem.q().shape();
        long[] kv = problem.k().shape();
        Files.createDirectories(out);
        write("o.npy", forward.output(), q, type);
        if (algo.softmax()) {
            write("lse.npy", forward.lse(), new long[] {q[0], q[1], q[2]}, type);
        }
        write("dq.npy", gradients.dq(), q, type);
        write("dk.npy", gradients.dk(), kv, type);
        write("dv.npy", gradients.dv(), kv, type);
        double forwardMs = (t1 - t0) / 1e6;
        double backwardMs = (t2 - t1) / 1e6;
        long peakBytes = peak.peakBytes();
        if (algorithm instanceof DistributedCheck d) {        // the workers' own times, not process start-up
            forwardMs = d.reports().stream().mapToDouble(DistributedCheck.RankReport::forwardMs).max().orElse(0);
            backwardMs = d.reports().stream().mapToDouble(DistributedCheck.RankReport::backwardMs).max().orElse(0);
            peakBytes = d.reports().stream().mapToLong(DistributedCheck.RankReport::peakBytes).max().orElse(0);
        }
        ObjectNode stats = stats(problem, algorithm, forwardMs, backwardMs, peak);
        if (algorithm instanceof DistributedCheck d) {
            putDistributed(stats, d, problem, (t2 - t0) / 1e6);
        }
        JSON.writeValue(out.resolve("stats.json").toFile(), stats);

        String params = algo.softmax() ? String.format(Locale.ROOT, "scale %.6g", problem.scale())
                : String.format(Locale.ROOT, "decay %.6g", problem.decay());
        spec.commandLine().getOut().printf(Locale.ROOT,
                "check %s: %s q %s k/v %s%s%s %s: forward %.1f ms, backward %.1f ms, peak %.1f MB;"
                        + " wrote %s%n",
                algo.cliName(), CheckInputs.typeName(type), Arrays.toString(q), Arrays.toString(kv),
                causal ? " causal" : "", window > 0 ? " window " + window : "", params,
                forwardMs, backwardMs, peakBytes / 1e6, out);
        spec.commandLine().getOut().flush();
        return 0;
    }

    private void checkOptionsFitAlgorithm() {
        if (algo.sequence() == null && (workers != 1 || team != null || layout != null)) {
            throw new UserInputException("--workers, --team and --layout apply to the sequence-parallel algorithms ("
                    + sequenceNames() + "), not " + algo.cliName());
        }
        if (workers < 1 || workers > 64) {
            throw new UserInputException("--workers must be in [1, 64], got " + workers);
        }
        if (!(timeout > 0)) {
            throw new UserInputException("--timeout must be > 0 seconds, got " + timeout);
        }
        if (algo.softmax() && decay != null) {
            throw new UserInputException("--decay applies to --algo linear only, not " + algo.cliName());
        }
        if (!algo.softmax() && (scale != null || window != 0)) {
            throw new UserInputException("--" + (scale != null ? "scale" : "window") + " does not apply to --algo "
                    + algo.cliName() + ": it multiplies q and k as given and has no window");
        }
        if (decay != null && !(decay > 0 && decay <= 1)) {
            throw new UserInputException("--decay must be in (0, 1], got " + decay);
        }
    }

    private static String sequenceNames() {
        return SequenceAlgorithm.names();
    }

    /**
     * The sequence-parallel algorithm's own options from the flags that name them: {@code --team} (WallFacer) and
     * {@code --decay} (for an algorithm that takes a decay); the descriptor refuses one it does not take.
     */
    private Map<String, Double> algorithmOptions() {
        Map<String, Double> options = new LinkedHashMap<>();
        if (team != null) {
            options.put("team", team.doubleValue());
        }
        boolean takesDecay = algo.sequence().options().stream().anyMatch(o -> o.name().equals("decay"));
        if (decay != null && takesDecay) {
            options.put("decay", decay);
        }
        return options;
    }

    /** The workers' own figures: per-rank times, bytes and peak memory, and the layout they used. */
    private static void putDistributed(ObjectNode s, DistributedCheck d, CheckProblem p, double wallMs) {
        s.put("layout", d.layout(p).name().toLowerCase(Locale.ROOT));
        SequenceAlgorithm.Settings settings = d.settings(p);
        for (SequenceAlgorithm.Option o : d.algorithm().options()) {
            s.put(o.name(), d.algorithm().option(settings, o.name()));
        }
        s.put("wall_ms", wallMs);
        s.put("peak_bytes", d.reports().stream().mapToLong(DistributedCheck.RankReport::peakBytes).max().orElse(0));
        s.remove("peak_bytes_baseline");
        s.put("peak_bytes_measure", PeakMemory.measure() + " of each worker process over its forward+backward; the "
                + "largest rank's");
        s.put("times_measure", "forward_ms and backward_ms: the slowest rank's own pass times, after its transport "
                + "connected; peak_bytes: the largest rank's; wall_ms: the whole launch, process start-up included");
        ArrayNode ranks = s.putArray("ranks");
        for (DistributedCheck.RankReport r : d.reports()) {
            ranks.addObject().put("rank", r.rank()).put("forward_ms", r.forwardMs()).put("backward_ms", r.backwardMs())
                    .put("forward_bytes", r.forwardBytes()).put("backward_bytes", r.backwardBytes())
                    .put("peak_bytes", r.peakBytes());
        }
    }

    private static Consumer<String> line(PrintWriter w) {
        return text -> {
            synchronized (w) {
                w.println(text);
                w.flush();
            }
        };
    }

    /** The algorithm refuses what it cannot take with an IllegalArgumentException: a user error here. */
    private static <T> T refusingBadInput(Supplier<T> call) {
        try {
            return call.get();
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage(), e);
        }
    }

    /** Writes one result, in the input's type; a wrong shape is a bug of the algorithm, not the user's. */
    private void write(String name, INDArray a, long[] shape, DataType type) throws IOException {
        if (!Arrays.equals(a.shape(), shape)) {
            throw new IllegalStateException(algo.cliName() + " returned " + name + " of shape "
                    + Arrays.toString(a.shape()) + "; expected " + Arrays.toString(shape));
        }
        Npy.write(out.resolve(name), a.dataType() == type ? a : a.castTo(type));
    }

    private ObjectNode stats(CheckProblem p, CheckableAlgorithm algorithm, double forwardMs, double backwardMs,
                             PeakMemory.Reading peak) {
        ObjectNode s = JSON.createObjectNode();
        s.put("algo", algo.cliName());
        s.put("workers", algorithm.workers());
        s.put("dtype", CheckInputs.typeName(p.q().dataType()));
        ObjectNode shape = s.putObject("shape");
        putShape(shape, "q", p.q());
        putShape(shape, "k", p.k());
        putShape(shape, "v", p.v());
        putShape(shape, "do", p.dO());
        s.put("causal", causal);
        s.put("window", window);
        if (algo.softmax()) {
            s.put("scale", p.scale());
            s.put("scale_default", scale == null);
        } else {
            s.put("decay", p.decay());
        }
        s.put("forward_ms", forwardMs);
        s.put("backward_ms", backwardMs);
        s.put("peak_bytes", peak.peakBytes());
        s.put("peak_bytes_baseline", peak.baselineBytes());
        s.put("peak_bytes_measure", peak.measure() + "; over forward+backward; peak_bytes_baseline is the "
                + "resident size just before the forward pass, with the inputs loaded");
        ArrayNode sent = s.putArray("bytes_sent");
        for (RankTraffic t : algorithm.bytesSent()) {
            sent.addObject().put("rank", t.rank()).put("forward", t.forwardBytes()).put("backward", t.backwardBytes());
        }
        s.put("omp_num_threads", System.getenv().getOrDefault("OMP_NUM_THREADS", "unset"));
        s.put("available_processors", Runtime.getRuntime().availableProcessors());
        return s;
    }

    private static void putShape(ObjectNode parent, String key, INDArray a) {
        ArrayNode dims = parent.putArray(key);
        for (long d : a.shape()) {
            dims.add(d);
        }
    }
}
