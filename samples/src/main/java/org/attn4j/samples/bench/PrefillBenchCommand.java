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

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench prefill}: first-token latency of the GPT-like model of {@code attn4j train} with a prompt of N
 * bytes prefilled over P worker processes ({@code DistributedDecoder}, Aeron over loopback), and the time per
 * token of the decoding after it. Writes {@code bench-prefill.csv} and the {@code prefill} section of
 * {@code benchmarks.md}.
 */
@Command(name = "prefill", mixinStandardHelpOptions = true,
        description = {"First-token latency of a prompt prefilled over P workers, and decoding after it.",
            "Writes OUT/bench-prefill.csv and a section of OUT/benchmarks.md."})
public final class PrefillBenchCommand implements Callable<Integer> {

    @Option(names = "--length", paramLabel = "N", defaultValue = "16384",
            description = "Prompt length in bytes (default: ${DEFAULT-VALUE}).")
    int length;

    @Option(names = "--workers", paramLabel = "P", split = ",", defaultValue = "1,2,4",
            description = "Worker counts (default: ${DEFAULT-VALUE}).")
    int[] workers;

    @Option(names = "--algo", paramLabel = "NAME", defaultValue = "ring",
            description = "Softmax sequence-parallel algorithm of the prefill (default: ${DEFAULT-VALUE}).")
    String algo;

    @Option(names = "--rounds", paramLabel = "R", defaultValue = "3",
            description = "Timed prefills per worker count; the median is reported (default: ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--steps", paramLabel = "S", defaultValue = "32",
            description = "Decoding steps timed after each prefill (default: ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "1g",
            description = "Java heap of each worker (default: ${DEFAULT-VALUE}).")
    String heap;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException, InterruptedException {
        Options.outputDirectory("--out", out);
        Options.atLeast("--length", length, 2);
        Options.atLeast("--rounds", rounds, 1);
        Options.atLeast("--steps", steps, 1);
        Options.heap("--heap", heap);
        SequenceAlgorithm algorithm;
        try {
            algorithm = SequenceAlgorithm.byName(algo);
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--algo: " + e.getMessage());
        }
        if (!algorithm.softmax()) {
            throw new UserInputException("--algo must be a softmax algorithm (" + SequenceAlgorithm.names(true)
                    + "), got " + algo);
        }
        for (int p : workers) {
            Options.atLeast("--workers", p, 1);
            // The model's 4 heads, causal; the prefill shards the longest prefix the layout splits evenly.
            int parts = algorithm.defaultLayout(true) == SequenceLayout.ZIGZAG ? 2 * p : p;
            try {
                algorithm.validate(SequenceAlgorithm.Settings.of(p, Math.max(parts, length / parts * parts), true)
                        .withHeads(4, 4));
            } catch (IllegalArgumentException e) {
                throw new UserInputException("--algo " + algo + " with --workers " + p + ": " + e.getMessage());
            }
        }
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        int cores = Runtime.getRuntime().availableProcessors();
        List<String> csv = new ArrayList<>(List.of("algorithm,workers,length,first_token_ms,ms_per_token,"
                + "cache_bytes_rank0"));
        StringBuilder md = new StringBuilder(MarkdownSection.opening("Sequence-parallel prefill",
                "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs()), machine,
                "The GPT-like model of `attn4j train` (2 blocks, d-model 64, 4 heads, flash attention, float32, "
                        + "random weights), a prompt of N random bytes, batch 1, run by `DistributedDecoder` on P "
                        + "worker processes over Aeron (UDP loopback), each given max(1, " + cores + " / P) cores "
                        + "(`-XX:ActiveProcessorCount`, `OMP_NUM_THREADS`). First token: the prefill, from the "
                        + "prompt to the distribution of the first new byte on every worker, the median of "
                        + rounds + " (after an untimed round). Per token: the median of " + steps + " decoding "
                        + "steps after it. Cache: the key/value bytes rank 0 holds."));
        md.append("| algorithm | P | N | first token ms | ms / token | cache bytes on rank 0 |\n"
                + "|---|---:|---:|---:|---:|---:|\n");
        for (int p : workers) {
            String row = run(p, Math.max(1, cores / p));
            String[] f = row.split(",");
            csv.add(row);
            md.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s |%n", f[0], f[1], f[2], f[3], f[4],
                    f[5]));
            log.printf(Locale.ROOT, "%s P=%s N=%s: first token %s ms, %s ms/token, cache %s bytes on rank 0%n", f[0],
                    f[1], f[2], f[3], f[4], f[5]);
            log.flush();
        }
        Files.createDirectories(out);
        Files.write(out.resolve("bench-prefill.csv"), csv, StandardCharsets.UTF_8);
        MarkdownSection.replace(out.resolve("benchmarks.md"), "prefill", md.toString());
        log.printf("wrote %s and the 'prefill' section of %s%n", out.resolve("bench-prefill.csv"),
                out.resolve("benchmarks.md"));
        return 0;
    }

    /** Runs P workers with {@code threads} cores each; rank 0's result row. */
    private String run(int p, int threads) throws IOException, InterruptedException {
        WorkerLines lines = new WorkerLines();
        LaunchResult r = LocalLauncher.builder(p, PrefillBenchWorker.class.getName())
                .args(List.of(algo, Integer.toString(length), Integer.toString(rounds), Integer.toString(steps)))
                .heap(heap).timeout(Duration.ofMinutes(30))
                .jvmArgs(List.of("-XX:ActiveProcessorCount=" + threads))
                .env("OMP_NUM_THREADS", Integer.toString(threads))
                .env("OPENBLAS_NUM_THREADS", Integer.toString(threads))
                .output(lines.sink(), line -> { }).build().run();
        if (!r.succeeded() || lines.results().isEmpty()) {
            throw new UserInputException("prefill on " + p + " workers failed: " + lines.firstFailure(r.toString()));
        }
        return lines.results().get(0);
    }
}
