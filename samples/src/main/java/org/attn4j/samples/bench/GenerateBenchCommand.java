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

import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.train.GptGraph;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench generate}: the time of one new token of the GPT-like model of {@code attn4j train} after a
 * context of C tokens, with the key/value cache ({@code rnnTimeStep} of one step) and without it (a forward pass
 * over the C + 1 tokens, what decoding costs when nothing is kept), for flash and linear attention. Writes
 * {@code bench-generate.csv} and the {@code generate} section of {@code benchmarks.md}.
 */
@Command(name = "generate", mixinStandardHelpOptions = true,
        description = {"Time one generated token after C tokens of context, with the key/value cache and without.",
            "Writes OUT/bench-generate.csv and a section of OUT/benchmarks.md."})
public final class GenerateBenchCommand implements Callable<Integer> {

    @Option(names = "--contexts", paramLabel = "C", split = ",", defaultValue = "512,2048,8192",
            description = "Context lengths (default: ${DEFAULT-VALUE}).")
    int[] contexts;

    @Option(names = "--tokens", paramLabel = "T", defaultValue = "64",
            description = "Cached steps timed per context; their median is reported (default: ${DEFAULT-VALUE}).")
    int tokens;

    @Option(names = "--rounds", paramLabel = "R", defaultValue = "3",
            description = "Rounds over the contexts, each timing the cached steps and one forward pass per context; "
                    + "the median round is reported (default: ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    private static final int VOCAB = 256;
    /** Cached steps before the timed ones, inside the context. */
    private static final int WARM_UP = 8;
    /** Untimed steps per model before its first context. */
    private static final int JIT_STEPS = 1000;

    @Override
    public Integer call() throws IOException {
        Options.outputDirectory("--out", out);
        Options.atLeast("--tokens", tokens, 1);
        Options.atLeast("--rounds", rounds, 1);
        for (int c : contexts) {
            if (c <= WARM_UP || c > 1 << 20) {
                throw new UserInputException("--contexts must be in [" + (WARM_UP + 1) + ", 1048576], got " + c);
            }
        }
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        int longest = Arrays.stream(contexts).max().orElse(1) + tokens + 1;
        List<String> csv = new ArrayList<>(List.of("attention,context,cached_ms_per_token,recompute_ms_per_token,"
                + "speedup"));
        StringBuilder md = new StringBuilder(MarkdownSection.opening("Generation with the key/value cache",
                "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs()), machine,
                "The GPT-like model of `attn4j train` (2 blocks, d-model 64, 4 heads, float32, random weights), "
                        + "batch 1. Cached: the median of " + tokens + " steps of `rnnTimeStep` with one token "
                        + "after a context of C tokens (a prompt in one call, then " + WARM_UP + " untimed steps; before the "
                        + "first context, " + JIT_STEPS + " untimed steps for the JIT). "
                        + "Recompute: a forward pass over C + 1 tokens, what each new token costs without a cache. "
                        + "Both are taken in each of " + rounds + " rounds over the contexts (against drifts of "
                        + "the machine's load) and the median round is reported."));
        md.append("| attention | context C | cached ms / token | recompute ms / token | cached speed-up |\n"
                + "|---|---:|---:|---:|---:|\n");
        for (GptGraph.Attention kind : new GptGraph.Attention[] {GptGraph.Attention.FLASH,
            GptGraph.Attention.LINEAR}) {
            ComputationGraph net = new GptGraph(VOCAB, longest, 64, 4, 4, 2, kind, DataType.FLOAT, 1e-3, 1).build();
            warmUp(net, Arrays.stream(contexts).min().orElse(WARM_UP + 1));
            double[][] cached = new double[contexts.length][rounds];
            double[][] recompute = new double[contexts.length][rounds];
            for (int r = 0; r < rounds; r++) {
                for (int i = 0; i < contexts.length; i++) {
                    cached[i][r] = cached(net, contexts[i]);
                    recompute[i][r] = recompute(net, contexts[i], r == 0);
                }
            }
            for (int i = 0; i < contexts.length; i++) {
                int c = contexts[i];
                double step = GemmRate.median(cached[i]);
                double full = GemmRate.median(recompute[i]);
                csv.add(String.format(Locale.ROOT, "%s,%d,%.4f,%.4f,%.2f", kind.cliName(), c, step, full,
                        full / step));
                md.append(String.format(Locale.ROOT, "| %s | %d | %.3f | %.2f | %.1fx |%n", kind.cliName(), c, step,
                        full, full / step));
                log.printf(Locale.ROOT, "%-6s C=%-6d cached %8.3f ms/token  recompute %9.2f ms/token  %.1fx%n",
                        kind.cliName(), c, step, full, full / step);
                log.flush();
            }
        }
        Files.createDirectories(out);
        Files.write(out.resolve("bench-generate.csv"), csv, StandardCharsets.UTF_8);
        MarkdownSection.replace(out.resolve("benchmarks.md"), "generate", md.toString());
        log.printf("wrote %s and the 'generate' section of %s%n", out.resolve("bench-generate.csv"),
                out.resolve("benchmarks.md"));
        return 0;
    }

    /**
     * Untimed: a prompt of {@code c} tokens and {@link #JIT_STEPS} steps after it, so that the JIT has compiled the
     * one-query paths before the first timed context (they differ from the prompt's).
     */
    private static void warmUp(ComputationGraph net, int c) {
        net.rnnClearPreviousState();
        net.rnnTimeStep(tokens(c, 0));
        for (int i = 0; i < JIT_STEPS; i++) {
            net.rnnTimeStep(tokens(1, c + i));
        }
    }

    /** The median time of one cached step after a prompt of {@code c} tokens, ms. */
    private double cached(ComputationGraph net, int c) {
        net.rnnClearPreviousState();
        net.rnnTimeStep(tokens(c - WARM_UP, 0));
        for (int i = 0; i < WARM_UP; i++) {                            // untimed: the JIT, the workspaces
            net.rnnTimeStep(tokens(1, c - WARM_UP + i));
        }
        double[] ms = new double[tokens];
        for (int i = 0; i < tokens; i++) {
            INDArray one = tokens(1, c + i);
            long t0 = System.nanoTime();
            net.rnnTimeStep(one);
            ms[i] = (System.nanoTime() - t0) / 1e6;
        }
        return GemmRate.median(ms);
    }

    /** The time of a forward pass over {@code c + 1} tokens, ms (after an untimed one when {@code warm}). */
    private static double recompute(ComputationGraph net, int c, boolean warm) {
        INDArray all = tokens(c + 1, 0);
        if (warm) {
            net.outputSingle(all);
        }
        long t0 = System.nanoTime();
        net.outputSingle(all);
        return (System.nanoTime() - t0) / 1e6;
    }

    /** {@code n} token ids {@code [1, 1, n]}, a fixed pattern from position {@code from}. */
    private static INDArray tokens(int n, int from) {
        INDArray t = Nd4j.zeros(DataType.FLOAT, 1, 1, n);
        for (int i = 0; i < n; i++) {
            t.putScalar(new int[] {0, 0, i}, (31 * (from + i) + 7) % VOCAB);
        }
        return t;
    }
}
