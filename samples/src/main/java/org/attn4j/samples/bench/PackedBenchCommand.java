package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench packed}: causal attention over one sequence packed with K equal documents against the same
 * sequence as one document, forward and forward+backward, flash and linear attention. Tiles of different
 * documents are skipped, so flash attention's time falls about as 1/K; linear attention's stays flat. Writes
 * {@code bench-packed.csv} and the {@code packed} section of {@code benchmarks.md}.
 */
@Command(name = "packed", mixinStandardHelpOptions = true,
        description = {"Time causal flash and linear attention on one sequence packed with K equal documents "
                + "against one document of the same length.",
            "Writes OUT/bench-packed.csv and a section of OUT/benchmarks.md."})
public final class PackedBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-packed.csv";
    static final String SECTION = "packed";

    @Option(names = "--seq-len", paramLabel = "N", defaultValue = "32768",
            description = "Sequence length N (default: ${DEFAULT-VALUE}).")
    int n;

    @Option(names = "--documents", paramLabel = "K", split = ",", defaultValue = "1,2,8,32",
            description = "Numbers of equal documents per sequence, each dividing N (default: ${DEFAULT-VALUE}).")
    int[] documents;

    @Option(names = "--rounds", paramLabel = "R", defaultValue = "5",
            description = "Interleaved rounds, each timing every configuration once; medians are reported "
                    + "(default: ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    private static final int HEAD_DIM = 64;
    private static final String[] OPS = {"flash", "linear"};
    private static final String[] PASSES = {"fwd", "fwd+bwd"};

    @Override
    public Integer call() throws IOException {
        Options.outputDirectory("--out", out);
        Options.atLeast("--seq-len", n, 1);
        Options.atLeast("--rounds", rounds, 1);
        for (int k : documents) {
            if (k < 1 || n % k != 0) {
                throw new UserInputException("--documents: each K must be >= 1 and divide --seq-len " + n + ", got "
                        + k);
            }
        }
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        log.printf(Locale.ROOT, "bench packed: N %d, D %d, documents %s, %d rounds%n", n, HEAD_DIM,
                Arrays.toString(documents), rounds);
        log.flush();
        INDArray q = Nd4j.randn(11L, new long[] {1, 1, n, HEAD_DIM}).castTo(DataType.FLOAT).muli(0.5);
        INDArray k = Nd4j.randn(12L, new long[] {1, 1, n, HEAD_DIM}).castTo(DataType.FLOAT).muli(0.5);
        INDArray v = Nd4j.randn(13L, new long[] {1, 1, n, HEAD_DIM}).castTo(DataType.FLOAT);
        INDArray g = Nd4j.randn(14L, new long[] {1, 1, n, HEAD_DIM}).castTo(DataType.FLOAT);
        double[][][][] ms = new double[OPS.length][documents.length][PASSES.length][rounds];
        for (int round = -1; round < rounds; round++) {               // round -1 warms up
            for (int o = 0; o < OPS.length; o++) {
                for (int d = 0; d < documents.length; d++) {
                    int[] lengths = new int[documents[d]];
                    Arrays.fill(lengths, n / documents[d]);
                    Documents docs = Documents.packed(1, n, lengths);
                    for (int p = 0; p < PASSES.length; p++) {
                        double t = time(OPS[o], p == 1, docs, q, k, v, g);
                        if (round >= 0) {
                            ms[o][d][p][round] = t;
                        }
                    }
                }
            }
        }
        List<String> csv = new ArrayList<>();
        csv.add("op,pass,n,documents,median_ms,ratio_to_one_document,rounds_ms");
        StringBuilder md = new StringBuilder();
        md.append(MarkdownSection.opening("Packed sequences", "./attn4j "
                + String.join(" ", spec.commandLine().getParseResult().originalArgs()), machine,
                "One sequence of N = " + n + " positions (B = 1, H = 1, D = " + HEAD_DIM + ", float32, causal) "
                        + "holding K documents of N/K positions each, against K = 1; linear attention with decay "
                        + "0.99. Medians of " + rounds + " interleaved rounds; ratio = time / time at K = 1."));
        md.append("| op | pass | K = documents | median ms | ratio to K = 1 |\n|---|---|---|---|---|\n");
        for (int o = 0; o < OPS.length; o++) {
            for (int p = 0; p < PASSES.length; p++) {
                double one = GemmRate.median(ms[o][indexOfOne()][p]);
                for (int d = 0; d < documents.length; d++) {
                    double med = GemmRate.median(ms[o][d][p]);
                    double ratio = med / one;
                    csv.add(String.format(Locale.ROOT, "%s,%s,%d,%d,%.3f,%.4f,%s", OPS[o], PASSES[p], n,
                            documents[d], med, ratio, join(ms[o][d][p])));
                    md.append(String.format(Locale.ROOT, "| %s | %s | %d | %.1f | %.3f |%n", OPS[o], PASSES[p],
                            documents[d], med, ratio));
                    log.printf(Locale.ROOT, "%-6s %-7s K=%-3d %9.1f ms  %.3f of K=1%n", OPS[o], PASSES[p],
                            documents[d], med, ratio);
                }
            }
        }
        Files.createDirectories(out);
        Files.write(out.resolve(CSV), csv, StandardCharsets.UTF_8);
        MarkdownSection.replace(out.resolve("benchmarks.md"), SECTION, md.toString());
        log.printf("wrote %s and the '%s' section of %s%n", out.resolve(CSV), SECTION, out.resolve("benchmarks.md"));
        log.flush();
        return 0;
    }

    private int indexOfOne() {
        for (int d = 0; d < documents.length; d++) {
            if (documents[d] == 1) {
                return d;
            }
        }
        throw new UserInputException("--documents must include 1 (the baseline), got " + Arrays.toString(documents));
    }

    private static double time(String op, boolean backward, Documents docs, INDArray q, INDArray k, INDArray v,
                               INDArray g) {
        long t0 = System.nanoTime();
        if (op.equals("flash")) {
            AttentionMask mask = AttentionMask.builder().causal(true).documents(docs).build();
            FlashAttention flash = FlashAttention.defaults();
            AttentionOutput out = flash.forward(q, k, v, mask, 0.125);
            if (backward) {
                flash.backward(q, k, v, out.output(), out.lse(), g, mask, 0.125);
            }
        } else {
            LinearAttention linear = LinearAttention.defaults();
            Decay decay = Decay.of(0.99);
            LinearAttentionOutput out = linear.forward(q, k, v, decay, true, null, docs);
            if (backward) {
                linear.backward(q, k, v, decay, true, null, g, null, out.cache(), docs);
            }
        }
        return (System.nanoTime() - t0) / 1e6;
    }

    private static String join(double[] x) {
        StringBuilder b = new StringBuilder();
        for (double t : x) {
            b.append(b.length() == 0 ? "" : " ").append(String.format(Locale.ROOT, "%.2f", t));
        }
        return b.toString();
    }
}
