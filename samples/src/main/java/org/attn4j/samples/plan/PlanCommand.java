package org.attn4j.samples.plan;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

import org.attn4j.distributed.plan.AttentionRate;
import org.attn4j.distributed.plan.ClusterSpec;
import org.attn4j.distributed.plan.ModelSpec;
import org.attn4j.distributed.plan.PlanProblem;
import org.attn4j.distributed.plan.Planner;
import org.attn4j.samples.UserInputException;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j plan}: predicts each sequence-parallel algorithm's time for a cluster, a model and N with an
 * alpha-beta cost model ({@link Planner}) and names the fastest. Prints a table; {@code --json} writes the same.
 */
@Command(name = "plan", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Predict each sequence-parallel attention algorithm's time with an alpha-beta cost model "
                + "(link bandwidth and latency inside and between nodes, the local attention rate) and name the "
                + "fastest.",
            "Presets give the papers' settings (sources in docs/algorithms.md); options override their fields."})
public final class PlanCommand implements Callable<Integer> {

    @Option(names = "--cluster", paramLabel = "NAME",
            description = "Cluster preset (a paper's setting): a100-16, a100-64, h100-64, wallfacer-h100, "
                    + "wallfacer-a100-8x4, wallfacer-a100-16x2, burst-a100-32, lasp-dgx-a100. The options below "
                    + "override its fields.")
    String cluster;

    @Option(names = "--nodes", paramLabel = "N", description = "Nodes.")
    Integer nodes;

    @Option(names = "--workers-per-node", paramLabel = "G", description = "Workers (GPUs) per node.")
    Integer workersPerNode;

    @Option(names = "--intra-bw", paramLabel = "GB/s", description = "A worker's bandwidth inside its node, GB/s.")
    Double intraBw;

    @Option(names = "--intra-latency", paramLabel = "US", description = "Latency of a message inside a node, us.")
    Double intraLatency;

    @Option(names = "--inter-bw", paramLabel = "GB/s",
            description = "Bandwidth of one network adapter between nodes, GB/s.")
    Double interBw;

    @Option(names = "--inter-latency", paramLabel = "US", description = "Latency of a message between nodes, us.")
    Double interLatency;

    @Option(names = "--nics", paramLabel = "K",
            description = "Network adapters per node (the node's concurrent messages share them; default 1).")
    Integer nics;

    @Option(names = "--rate", paramLabel = "TFLOPS",
            description = "Rate of the local attention kernel, TFLOP/s (default: the cluster preset's).")
    Double rate;

    @Option(names = "--measure",
            description = "Measure the rate: time a FlashAttention forward+backward pass on this machine.")
    boolean measure;

    @Option(names = "--model", paramLabel = "NAME",
            description = "Model preset: gpt3-760m, gpt3-2.7b, gpt3-13b, gpt3-66b, gpt3-175b, llama-30b, gpt-7b, "
                    + "llama2-7b. The options below override its fields.")
    String model;

    @Option(names = "--batch", paramLabel = "B", description = "Sequences per step (default 1).")
    Integer batch;

    @Option(names = "--heads", paramLabel = "H", description = "Query heads.")
    Integer heads;

    @Option(names = "--kv-heads", paramLabel = "HKV", description = "Key/value heads (default: --heads).")
    Integer kvHeads;

    @Option(names = "--head-dim", paramLabel = "D", description = "Head dimension.")
    Integer headDim;

    @Option(names = "--bytes", paramLabel = "W", description = "Bytes per element on the wire (default 2).")
    Integer bytes;

    @Option(names = "--layers", paramLabel = "L", description = "Attention layers to sum over (default 1).")
    Integer layers;

    @Option(names = {"-N", "--seq-len"}, paramLabel = "N[,N...]", required = true,
            description = "Sequence length(s), e.g. 8192 or 8k,16k,32k (k = 1024, m = 1048576).")
    String seqLen;

    @Option(names = "--causal", description = "Causal mask (GPT-like models).")
    boolean causal;

    @Option(names = "--attention", paramLabel = "KIND", defaultValue = "softmax",
            description = "softmax (ring, WallFacer, ATTENTION2D, Ulysses) or linear (LASP); default softmax.")
    String attention;

    @Option(names = "--team-size", paramLabel = "C",
            description = "Price WallFacer with this team size only (C^2 must divide P); default: the best C.")
    Integer teamSize;

    @Option(names = "--json", paramLabel = "FILE", description = "Also write the predictions as JSON.")
    Path json;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        ClusterPreset clusterPreset = cluster == null ? null : refusing(() -> ClusterPreset.of(cluster));
        ModelPreset modelPreset = model == null ? null : refusing(() -> ModelPreset.of(model));
        ClusterSpec c = refusing(() -> clusterSpec(clusterPreset));
        ModelSpec m = refusing(() -> modelSpec(modelPreset));
        boolean linear = switch (attention.strip().toLowerCase(Locale.ROOT)) {
            case "softmax" -> false;
            case "linear" -> true;
            default -> throw new UserInputException("--attention must be softmax or linear, got '" + attention + "'");
        };
        List<Long> lengths = lengths(seqLen);
        int p = c.workers();
        if (teamSize != null && (teamSize < 1 || p % ((long) teamSize * teamSize) != 0)) {
            throw new UserInputException("--team-size " + teamSize + ": C must be >= 1 with C^2 dividing P = " + p);
        }
        if (json != null && Files.isDirectory(json)) {
            throw new UserInputException("--json " + json + " is a directory");
        }
        String rateSource;
        double tflops;
        if (measure && rate != null) {
            throw new UserInputException("--rate and --measure exclude each other");
        } else if (measure) {
            AttentionRate measured = AttentionRate.measure();
            tflops = measured.tflops();
            rateSource = String.format(Locale.ROOT, "measured on this machine: FlashAttention forward+backward, %s,"
                    + " median of %d: %.3f s", measured.shape(), measured.rounds(), measured.seconds());
        } else if (rate != null) {
            tflops = rate;
            rateSource = "--rate";
        } else if (clusterPreset != null) {
            tflops = clusterPreset.tflops();
            rateSource = "assumed by preset " + clusterPreset.cliName();
        } else {
            throw new UserInputException("give --rate TFLOPS, --measure or a --cluster preset");
        }
        List<Planner.Plan> plans = new ArrayList<>();
        for (long n : lengths) {
            PlanProblem problem = refusing(() -> new PlanProblem(c, m, n, causal, linear, tflops));
            plans.add(Planner.plan(problem, teamSize == null ? Map.of() : Map.of("team", teamSize.doubleValue())));
        }
        PlanReport report = new PlanReport(clusterPreset, modelPreset, rateSource, plans);
        PrintWriter out = spec.commandLine().getOut();
        report.print(out);
        out.flush();
        if (json != null) {
            Path parent = json.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            report.writeJson(json);
        }
        return 0;
    }

    private ClusterSpec clusterSpec(ClusterPreset preset) {
        ClusterSpec base = preset == null ? null : preset.cluster();
        if (base == null) {
            List<String> missing = new ArrayList<>();
            if (nodes == null) {
                missing.add("--nodes");
            }
            if (workersPerNode == null) {
                missing.add("--workers-per-node");
            }
            if (intraBw == null && !(workersPerNode != null && workersPerNode == 1)) {
                missing.add("--intra-bw");
            }
            if (interBw == null && !(nodes != null && nodes == 1)) {
                missing.add("--inter-bw");
            }
            if (!missing.isEmpty()) {
                throw new IllegalArgumentException("without --cluster give " + String.join(", ", missing)
                        + " (or a preset: " + ClusterPreset.names() + ")");
            }
        }
        return new ClusterSpec(
                pick(nodes, base == null ? 0 : base.nodes()),
                pick(workersPerNode, base == null ? 0 : base.workersPerNode()),
                pick(intraBw, base == null ? 1 : base.intraGBps()),
                pick(intraLatency, base == null ? 0 : base.intraLatencyUs()),
                pick(interBw, base == null ? 1 : base.interGBps()),
                pick(interLatency, base == null ? 0 : base.interLatencyUs()),
                pick(nics, base == null ? 1 : base.nicsPerNode()));
    }

    private ModelSpec modelSpec(ModelPreset preset) {
        ModelSpec base = preset == null ? null : preset.model();
        if (base == null && (heads == null || headDim == null)) {
            throw new IllegalArgumentException("without --model give --heads and --head-dim (or a preset: "
                    + ModelPreset.names() + ")");
        }
        int h = pick(heads, base == null ? 0 : base.heads());
        return new ModelSpec(
                pick(batch, base == null ? 1 : base.batch()), h,
                pick(kvHeads, base == null || heads != null ? h : base.kvHeads()),
                pick(headDim, base == null ? 0 : base.headDim()),
                pick(bytes, base == null ? 2 : base.bytesPerElement()),
                pick(layers, base == null ? 1 : base.layers()));
    }

    /** Parses "8192", "8k,16k" (k = 1024, m = 1048576). */
    static List<Long> lengths(String text) {
        List<Long> out = new ArrayList<>();
        for (String part : text.split(",")) {
            String s = part.strip().toLowerCase(Locale.ROOT);
            long unit = s.endsWith("k") ? 1L << 10 : s.endsWith("m") ? 1L << 20 : 1;
            String digits = unit == 1 ? s : s.substring(0, s.length() - 1);
            long n;
            try {
                n = Math.multiplyExact(Long.parseLong(digits), unit);
            } catch (NumberFormatException | ArithmeticException e) {
                throw new UserInputException("--seq-len must be lengths such as 8192 or 8k,16k, got \"" + text
                        + "\"", e);
            }
            if (n < 1) {
                throw new UserInputException("--seq-len must be >= 1, got " + n);
            }
            out.add(n);
        }
        return out;
    }

    private static <T> T pick(T given, T preset) {
        return given != null ? given : preset;
    }

    private interface Build<T> {
        T get();
    }

    /** The specs refuse bad values with IllegalArgumentException: a user error here. */
    private static <T> T refusing(Build<T> build) {
        try {
            return build.get();
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage(), e);
        }
    }
}
