package org.attn4j.samples.plan;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.attn4j.distributed.plan.ClusterSpec;
import org.attn4j.distributed.plan.ModelSpec;
import org.attn4j.distributed.plan.PlanProblem;
import org.attn4j.distributed.plan.Planner;
import org.attn4j.distributed.plan.Prediction;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.SerializationFeature;
import org.nd4j.shade.jackson.databind.node.ArrayNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/** The plans of one {@code attn4j plan} run as a table (stdout) and as JSON. */
final class PlanReport {

    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    private static final double MIB = 1 << 20;
    private static final String ROW = "%-20s %-26s %10s %10s %10s %13s %11s %10s %11s %8s%n";

    private final ClusterPreset clusterPreset;
    private final ModelPreset modelPreset;
    private final String rateSource;
    private final List<Planner.Plan> plans;

    PlanReport(ClusterPreset clusterPreset, ModelPreset modelPreset, String rateSource, List<Planner.Plan> plans) {
        this.clusterPreset = clusterPreset;
        this.modelPreset = modelPreset;
        this.rateSource = rateSource;
        this.plans = plans;
    }

    void print(PrintWriter out) {
        PlanProblem first = plans.get(0).problem();
        ClusterSpec c = first.cluster();
        ModelSpec m = first.model();
        out.printf(Locale.ROOT, "attn4j plan: %s%d node%s x %d worker%s, P = %d%n",
                clusterPreset == null ? "" : "cluster " + clusterPreset.cliName() + ", ", c.nodes(),
                c.nodes() == 1 ? "" : "s", c.workersPerNode(), c.workersPerNode() == 1 ? "" : "s", c.workers());
        if (clusterPreset != null) {
            out.println("  setting: " + clusterPreset.source());
            out.println("  preset assumes: " + clusterPreset.assumed());
        }
        out.printf(Locale.ROOT, "  inside a node %s GB/s, %s us; between nodes %s GB/s per adapter, %d adapter%s per "
                        + "node, %s us%n", num(c.intraGBps()), num(c.intraLatencyUs()), num(c.interGBps()),
                c.nicsPerNode(), c.nicsPerNode() == 1 ? "" : "s", num(c.interLatencyUs()));
        out.printf(Locale.ROOT, "  attention kernel %s TFLOP/s (%s)%n", num(first.tflops()), rateSource);
        out.printf(Locale.ROOT, "model %sB %d, H %d, Hkv %d, D %d, %d bytes per element, %d layer%s; %s attention%s%n",
                modelPreset == null ? "" : modelPreset.cliName() + " (" + modelPreset.source() + "): ", m.batch(),
                m.heads(), m.kvHeads(), m.headDim(), m.bytesPerElement(), m.layers(), m.layers() == 1 ? "" : "s",
                first.linear() ? "linear" : "softmax", first.causal() ? ", causal" : "");
        out.println("bytes: MiB sent by the busiest rank over all layers (inter: of fwd+bwd, between nodes); msgs: "
                + "messages it sends; compute: local compute on the critical path; times in ms, all layers");
        for (Planner.Plan plan : plans) {
            printPlan(out, plan);
        }
    }

    private static void printPlan(PrintWriter out, Planner.Plan plan) {
        PlanProblem p = plan.problem();
        out.printf(Locale.ROOT, "%nN = %d (N/P = %d)%n", p.length(), p.shard());
        out.printf(Locale.ROOT, ROW, "algorithm", "config", "fwd MiB", "bwd MiB", "inter MiB", "msgs fwd/bwd",
                "compute ms", "fwd ms", "fwd+bwd ms", "vs ring");
        List<String> notes = new ArrayList<>();
        for (Prediction r : plan.all()) {
            if (!r.available()) {
                out.printf(Locale.ROOT, "%-20s n/a: %s%n", r.algorithm(), r.unavailable());
                continue;
            }
            String config = r.config();
            if (r.note() != null) {
                notes.add(r.note());
                config += " [" + notes.size() + "]";
            }
            out.printf(Locale.ROOT, ROW, r.algorithm(), config, mib(r.forwardBytes()), mib(r.backwardBytes()),
                    mib(r.interNodeBytes()), r.forwardMessages() + "/" + r.backwardMessages(),
                    ms(r.computeSeconds()), ms(r.forwardSeconds()), ms(r.totalSeconds()),
                    String.format(Locale.ROOT, "%.2fx", plan.speedupOverRing(r)));
        }
        Prediction f = plan.fastest();
        out.printf(Locale.ROOT, "fastest: %s (%s): %s ms forward+backward, %.2fx ring%n", f.algorithm(), f.config(),
                ms(f.totalSeconds()), plan.speedupOverRing(f));
        for (int i = 0; i < notes.size(); i++) {
            out.printf(Locale.ROOT, "[%d] %s%n", i + 1, notes.get(i));
        }
    }

    void writeJson(Path file) throws IOException {
        PlanProblem first = plans.get(0).problem();
        ClusterSpec c = first.cluster();
        ModelSpec m = first.model();
        ObjectNode root = JSON.createObjectNode();
        ObjectNode cluster = root.putObject("cluster");
        if (clusterPreset != null) {
            cluster.put("preset", clusterPreset.cliName());
            cluster.put("source", clusterPreset.source());
            cluster.put("preset_assumes", clusterPreset.assumed());
        }
        cluster.put("nodes", c.nodes());
        cluster.put("workers_per_node", c.workersPerNode());
        cluster.put("workers", c.workers());
        cluster.put("intra_gb_per_s", c.intraGBps());
        cluster.put("intra_latency_us", c.intraLatencyUs());
        cluster.put("inter_gb_per_s_per_adapter", c.interGBps());
        cluster.put("inter_latency_us", c.interLatencyUs());
        cluster.put("adapters_per_node", c.nicsPerNode());
        root.put("rate_tflops", first.tflops());
        root.put("rate_source", rateSource);
        ObjectNode model = root.putObject("model");
        if (modelPreset != null) {
            model.put("preset", modelPreset.cliName());
            model.put("source", modelPreset.source());
        }
        model.put("batch", m.batch());
        model.put("heads", m.heads());
        model.put("kv_heads", m.kvHeads());
        model.put("head_dim", m.headDim());
        model.put("bytes_per_element", m.bytesPerElement());
        model.put("layers", m.layers());
        root.put("attention", first.linear() ? "linear" : "softmax");
        root.put("causal", first.causal());
        root.put("units", "bytes sent by the busiest rank and seconds, summed over the layers");
        ArrayNode list = root.putArray("plans");
        for (Planner.Plan plan : plans) {
            ObjectNode n = list.addObject();
            n.put("seq_len", plan.problem().length());
            n.put("fastest", plan.fastest().algorithm());
            n.put("fastest_config", plan.fastest().config());
            ArrayNode preds = n.putArray("predictions");
            for (Prediction r : plan.all()) {
                put(preds.addObject(), r, plan);
            }
        }
        JSON.writeValue(file.toFile(), root);
    }

    private static void put(ObjectNode o, Prediction r, Planner.Plan plan) {
        o.put("algorithm", r.algorithm());
        o.put("source", r.source());
        o.put("available", r.available());
        if (!r.available()) {
            o.put("unavailable", r.unavailable());
            return;
        }
        o.put("config", r.config());
        if (r.note() != null) {
            o.put("note", r.note());
        }
        o.put("forward_bytes", r.forwardBytes());
        o.put("backward_bytes", r.backwardBytes());
        o.put("inter_node_bytes", r.interNodeBytes());
        o.put("forward_messages", r.forwardMessages());
        o.put("backward_messages", r.backwardMessages());
        o.put("compute_seconds", r.computeSeconds());
        o.put("forward_seconds", r.forwardSeconds());
        o.put("total_seconds", r.totalSeconds());
        o.put("speedup_over_ring", plan.speedupOverRing(r));
        if (!r.alternatives().isEmpty()) {
            ArrayNode alt = o.putArray("alternatives");
            for (Prediction a : r.alternatives()) {
                put(alt.addObject(), a, plan);
            }
        }
    }

    private static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.1f", bytes / MIB);
    }

    /** Milliseconds with about four significant digits. */
    static String ms(double seconds) {
        return Prediction.milliseconds(seconds);
    }

    private static String num(double v) {
        return v == Math.rint(v) && Math.abs(v) < 1e15 ? String.valueOf((long) v)
                : String.format(Locale.ROOT, "%.4g", v);
    }
}
