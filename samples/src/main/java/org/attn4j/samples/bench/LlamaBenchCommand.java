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
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.models.hf.HfConfig;
import org.attn4j.samples.MemoryLimit;
import org.attn4j.samples.Options;
import org.attn4j.samples.UserInputException;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench llama}: a Llama-family model of a {@code config.json}'s shape (random weights, float32) in
 * attn4j, and with {@code --compare-hf} the same shape in Hugging Face transformers + PyTorch, each measured in a
 * process of its own: greedy decoding tokens per second with the key/value cache after a prompt of N tokens, or
 * fine-tuning tokens per second (whole steps: forward, backward, Adam) on sequences of N tokens, and the process's
 * peak resident memory. Writes {@code bench-llama.csv} (attn4j), {@code bench-llama-hf.csv} (the anchor) and the
 * {@code llama} section of {@code benchmarks.md}; in train mode {@code bench-llama-train.csv},
 * {@code bench-llama-train-hf.csv} and the {@code llama-train} section.
 */
@Command(name = "llama", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Decoding or fine-tuning speed and peak memory of a Llama-family model of a config.json's "
                + "shape (random weights), beside Hugging Face transformers with --compare-hf.",
            "Writes OUT/bench-llama.csv (mode,n,batch,tokens_per_s,peak_rss_mb; bench-llama-train.csv in train "
                    + "mode), OUT/bench-llama-hf.csv (bench-llama-train-hf.csv) and a "
                    + "section of OUT/benchmarks.md."})
public final class LlamaBenchCommand implements Callable<Integer> {

    static final String HEADER = "mode,n,batch,tokens_per_s,peak_rss_mb";
    /** Long enough for the anchor to make its environment on first use. */
    private static final long ANCHOR_TIMEOUT_MINUTES = 60;

    @Option(names = "--config", paramLabel = "CONFIG.json", required = true,
            description = "A Hugging Face config.json (llama, mistral or qwen2); only its shape is used.")
    Path config;

    @Option(names = "--layers", paramLabel = "L", defaultValue = "0",
            description = "Decoder layers instead of the config's (0: keep; default: ${DEFAULT-VALUE}).")
    int layers;

    @Option(names = "--mode", paramLabel = "MODE", defaultValue = "decode",
            description = "decode: greedy tokens per second with the key/value cache after an N-token prompt; "
                    + "train: tokens per second of fine-tuning steps (forward, backward, Adam) on sequences of N "
                    + "tokens (default: ${DEFAULT-VALUE}).")
    String mode;

    @Option(names = "--n", paramLabel = "N", split = ",", defaultValue = "4096",
            description = "Prompt lengths (decode) or sequence lengths (train) (default: ${DEFAULT-VALUE}).")
    int[] lengths;

    @Option(names = "--steps", paramLabel = "S", defaultValue = "3",
            description = "train: steps timed after the --untimed-steps (default: ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--untimed-steps", paramLabel = "U", defaultValue = "1",
            description = "train: steps run before the timed ones (the JIT, Adam's state; default: ${DEFAULT-VALUE}; 0 "
                    + "times the first step too, for a long sequence's memory in one step).")
    int untimedSteps;

    @Option(names = "--new-tokens", paramLabel = "K", defaultValue = "32",
            description = "Tokens decoded and timed after the prompt (default: ${DEFAULT-VALUE}).")
    int newTokens;

    @Option(names = "--batch", paramLabel = "B", defaultValue = "1", description = "Sequences per step (default: "
            + "${DEFAULT-VALUE}; decoding runs one).")
    int batch;

    @Option(names = "--activation-checkpointing", description = "train: recompute each decoder block in the backward "
            + "pass instead of keeping its activations (the anchor runs without it).")
    boolean activationCheckpointing;

    @Option(names = "--compare-hf", paramLabel = "DIR",
            description = "Also run DIR/run.sh (the Hugging Face transformers anchor, a separate program) with the "
                    + "same shape and settings.")
    Path anchor;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "1g",
            description = "Java heap of the measuring process (the weights are off-heap; default: "
                    + "${DEFAULT-VALUE}).")
    String heap;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSVs and benchmarks.md (default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException, InterruptedException {
        Options.outputDirectory("--out", out);
        Options.heap("--heap", heap);
        Options.atLeast("--new-tokens", newTokens, 1);
        Options.atLeast("--steps", steps, 1);
        Options.atLeast("--untimed-steps", untimedSteps, 0);
        if (untimedSteps != 1 && anchor != null) {
            throw new UserInputException("--compare-hf: the anchor times its steps after one untimed step, got "
                    + "--untimed-steps " + untimedSteps);
        }
        Options.atLeast("--batch", batch, 1);
        Options.atLeast("--layers", layers, 0);
        boolean train = mode.equals("train");
        if (!train && !mode.equals("decode")) {
            throw new UserInputException("--mode must be decode or train, got " + mode);
        }
        if (!train && activationCheckpointing) {
            throw new UserInputException("--activation-checkpointing is for --mode train");
        }
        if (!train && batch != 1) {
            throw new UserInputException("--batch: decoding runs one sequence, got " + batch);
        }
        for (int n : lengths) {
            if (n < (train ? 2 : 1) || n > 1 << 20) {
                throw new UserInputException("--n must be in [" + (train ? 2 : 1) + ", 1048576], got " + n);
            }
        }
        HfConfig c;
        try {
            c = HfConfig.readFile(config.toAbsolutePath());
            if (layers > 0) {
                c = c.withLayers(layers);
            }
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--config " + e.getMessage());
        }
        if (anchor != null && !Files.isRegularFile(anchor.resolve("run.sh"))) {
            throw new UserInputException("--compare-hf expects a directory holding run.sh (the Hugging Face "
                    + "anchor), got " + anchor);
        }
        PrintWriter log = spec.commandLine().getOut();
        MachineInfo machine = MachineInfo.current();
        List<String> ours = new ArrayList<>(List.of(HEADER));
        List<String> theirs = new ArrayList<>(List.of(HEADER + ",torch,transformers"));
        String measured = train ? "Train: tokens per second of " + steps + " whole fine-tuning steps (forward, "
                + "backward and an Adam update of every weight, learning rate 1e-5) on " + batch + " sequence(s) of N "
                + "random tokens, each position predicting the next (cross-entropy over the whole vocabulary); "
                + (untimedSteps == 1 ? "one step" : untimedSteps + " steps") + " before them "
                + (untimedSteps == 1 ? "is" : "are") + " not timed, nor is making the batches."
                + (activationCheckpointing ? " attn4j recomputes each decoder block in the backward pass (activation "
                + "checkpointing); transformers keeps every activation." : "")
                : "Decode: greedy tokens per second over " + newTokens + " tokens with the key/value cache after a "
                + "prompt of N random tokens (the prompt is not timed; a short generation before it is not either).";
        StringBuilder md = new StringBuilder(MarkdownSection.opening("Llama-family models beside Hugging Face "
                + "transformers" + (train ? ": fine-tuning" : ""),
                "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs()),
                machine, "A model of the shape of `" + config.getFileName() + "` (" + c.layers() + " layers of width "
                        + c.hidden() + ", " + c.heads() + " query and " + c.kvHeads() + " key/value heads of "
                        + c.headDim() + ", SwiGLU " + c.intermediate() + ", vocabulary " + c.vocab() + "), random "
                        + "weights, float32. " + measured + " Each figure comes from a process of its own, whose "
                        + "peak resident memory (VmHWM, ru_maxrss) is reported: attn4j's with the weights "
                        + "off-heap and a " + heap + " Java heap, Hugging Face transformers + PyTorch's "
                        + "(`attn_implementation=\"sdpa\"`) beside it with the same shape, both on every core "
                        + "(attn4j's waiting threads sleeping: `OMP_WAIT_POLICY=PASSIVE`, "
                        + "`OPENBLAS_THREAD_TIMEOUT=4`)."));
        md.append("| mode | N | attn4j tokens/s | transformers tokens/s | attn4j / transformers | attn4j peak MB "
                + "| transformers peak MB |\n|---|---:|---:|---:|---:|---:|---:|\n");
        for (int n : lengths) {
            String[] a = measure(n).split(",");
            ours.add(String.join(",", a));
            log.printf(Locale.ROOT, "attn4j        %s N=%d: %s tokens/s, peak %s MB%n", mode, n, a[3], a[4]);
            log.flush();
            String[] h = anchor == null ? null : runAnchor(n);
            if (h != null) {
                theirs.add(String.join(",", h));
                log.printf(Locale.ROOT, "transformers  %s N=%d: %s tokens/s, peak %s MB (torch %s, "
                        + "transformers %s)%n", mode, n, h[3], h[4], h[5], h[6]);
                log.flush();
            }
            md.append(String.format(Locale.ROOT, "| %s | %d | %s | %s | %s | %s | %s |%n", mode, n, a[3],
                    h == null ? "-" : h[3], h == null ? "-" : String.format(Locale.ROOT, "%.2fx",
                            Double.parseDouble(a[3]) / Double.parseDouble(h[3])), a[4], h == null ? "-" : h[4]));
        }
        Files.createDirectories(out);
        String name = train ? "llama-train" : "llama";
        Files.write(out.resolve("bench-" + name + ".csv"), ours, StandardCharsets.UTF_8);
        if (anchor != null) {
            Files.write(out.resolve("bench-" + name + "-hf.csv"), theirs, StandardCharsets.UTF_8);
        }
        MarkdownSection.replace(out.resolve("benchmarks.md"), name, md.toString());
        log.printf("wrote %s%s and the '%s' section of %s%n", out.resolve("bench-" + name + ".csv"),
                anchor == null ? "" : ", " + out.resolve("bench-" + name + "-hf.csv"), name,
                out.resolve("benchmarks.md"));
        return 0;
    }

    /** attn4j's row at prompt length {@code n}, from a worker process on every core. */
    private String measure(int n) throws IOException, InterruptedException {
        WorkerLines lines = new WorkerLines();
        String cores = Integer.toString(Runtime.getRuntime().availableProcessors());
        LaunchResult r = LocalLauncher.builder(1, LlamaBenchWorker.class.getName())
                .args(List.of(config.toAbsolutePath().toString(), Integer.toString(layers), mode, Integer.toString(n),
                        Integer.toString(batch), Integer.toString(mode.equals("train") ? steps : newTokens),
                        Boolean.toString(activationCheckpointing), Integer.toString(untimedSteps)))
                .heap(heap).timeout(Duration.ofHours(2))
                // No JavaCPP bound on the resident memory (by default four times the heap): the peak is what is
                // measured, and a fine-tuning step of a large shape holds several times the heap off-heap.
                .jvmArgs(MemoryLimit.unboundedFlags())
                .env("OMP_NUM_THREADS", cores).env("OPENBLAS_NUM_THREADS", cores)
                // Threads that wait sleep instead of spinning (OpenMP's passive policy; OpenBLAS's threads after
                // 2^4 cycles instead of 2^28), so ND4J's OpenMP threads and OpenBLAS's do not take the cores from
                // each other between operations: an 8-layer step at N = 2048 on 2 cores ran about a fifth faster.
                .env("OMP_WAIT_POLICY", "PASSIVE").env("OPENBLAS_THREAD_TIMEOUT", "4")
                .output(lines.sink(), line -> { }).build().run();
        if (!r.succeeded() || lines.results().isEmpty()) {
            throw new UserInputException("bench llama at N = " + n + " failed: " + lines.firstFailure(r.toString()));
        }
        return lines.results().get(0);
    }

    /**
     * The anchor's row at prompt length {@code n}: {@code mode,n,batch,tokens_per_s,peak_rss_mb,torch,transformers},
     * or null (said on the log) when it could not run.
     */
    private String[] runAnchor(int n) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("bash", anchor.resolve("run.sh").toAbsolutePath().toString(),
                mode, "--config", config.toAbsolutePath().toString(), "--n", Integer.toString(n), "--new-tokens",
                Integer.toString(newTokens), "--steps", Integer.toString(steps), "--batch", Integer.toString(batch)));
        if (layers > 0) {
            command.addAll(List.of("--layers", Integer.toString(layers)));
        }
        Path err = Files.createTempFile("attn4j-hf-anchor", ".err");
        try {
            Process p = new ProcessBuilder(command).directory(anchor.toFile()).redirectError(err.toFile()).start();
            String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            boolean done = p.waitFor(ANCHOR_TIMEOUT_MINUTES, TimeUnit.MINUTES);
            if (!done) {
                p.destroyForcibly();
            }
            List<String> lines = text.lines().map(String::strip).filter(l -> !l.isEmpty()).toList();
            int header = lines.indexOf("mode,n,batch,threads,tokens_per_s,peak_rss_mb,torch,transformers");
            if (done && p.exitValue() == 0 && header >= 0 && header + 1 < lines.size()) {
                String[] f = lines.get(header + 1).split(",");
                return new String[] {f[0], f[1], f[2], f[4], f[5], f[6], f[7]};
            }
            String why = done ? "exit " + p.exitValue() + ": " + Files.readString(err).lines()
                    .reduce((a, b) -> b).orElse("no output") : "timed out";
            spec.commandLine().getOut().println("transformers anchor at N = " + n + " did not run (" + why + ")");
            return null;
        } finally {
            Files.deleteIfExists(err);
        }
    }
}
