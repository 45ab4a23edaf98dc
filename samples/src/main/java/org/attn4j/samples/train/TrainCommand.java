package org.attn4j.samples.train;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.Callable;

import org.attn4j.distributed.launch.JobEnvironment;
import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.Packing;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.layers.PackedSequences;
import org.attn4j.ops.Documents;
import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.JobRank;
import org.attn4j.samples.MemoryLimit;
import org.attn4j.samples.StrategyOption;
import org.attn4j.samples.Options;
import org.attn4j.samples.Sizes;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.metrics.PeakMemory;
import org.bytedeco.javacpp.Pointer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.node.JsonNodeFactory;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j train}: trains the GPT-like {@link GptGraph} on a long-context task or a text file, on one process
 * or sequence-parallel over {@code --workers} processes, and reports how it went. Every optimisation step prints
 * {@code step <n> loss <value>} (full precision; rank 0 only); a progress line shows speed and time left. Before the
 * first step {@code OUT/summary.json} (status "running") and the model ({@code OUT/model.zip}, for {@code attn4j
 * generate}) exist; the model is saved again every {@code --checkpoint-every} steps and at the end, with
 * {@code OUT/loss.png}; the summary ends "completed", or "failed: ..." / "stopped: ..." with the steps done and the
 * step the model holds ({@link TrainingRecord}).
 */
@Command(name = "train", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Train a GPT-like model on a long-context task (passkey retrieval, associative recall) or",
            "a UTF-8 text file, on one process or sequence-parallel over worker processes."})
public final class TrainCommand implements Callable<Integer> {

    /** The run name in the checkpoints of attn4j train. */
    static final String RUN = "attn4j-train";
    /** Sequences the accuracy at the end is measured on. */
    static final int EVAL_SEQUENCES = 64;

    @Option(names = "--task", paramLabel = "NAME", defaultValue = "passkey",
            description = "Synthetic task: passkey or recall (default: ${DEFAULT-VALUE}); ignored with --text.")
    String task;

    @Option(names = "--text", paramLabel = "FILE", description = "Train on this UTF-8 text file, byte by byte.")
    Path text;

    @Option(names = "--pack", description = {"Packed sequences: with --text, cut the text into documents (blank "
            + "lines, or --doc-separator) and fill each sequence with consecutive documents; with --task, fill each "
            + "sequence with several independent samples. Attention stays inside each document; a prediction "
            + "across two documents is not scored."})
    boolean pack;

    @Option(names = "--pad", description = "With --text: one document per sequence, padded (what --pack replaces).")
    boolean pad;

    @Option(names = "--doc-separator", paramLabel = "TEXT",
            description = "With --text and --pack or --pad: documents end at this text (default: a blank line).")
    String docSeparator;

    @Option(names = "--seq-len", paramLabel = "N", defaultValue = "128",
            description = "Sequence length (default: ${DEFAULT-VALUE}).")
    int seqLen;

    @Option(names = "--layers", paramLabel = "L", defaultValue = "2",
            description = "Transformer blocks (default: ${DEFAULT-VALUE}).")
    int layers;

    @Option(names = "--d-model", paramLabel = "WIDTH", defaultValue = "64",
            description = "Model width (default: ${DEFAULT-VALUE}).")
    int dModel;

    @Option(names = "--heads", paramLabel = "H", defaultValue = "4",
            description = "Query heads (default: ${DEFAULT-VALUE}).")
    int heads;

    @Option(names = "--kv-heads", paramLabel = "HKV", defaultValue = "4",
            description = "Key/value heads (default: ${DEFAULT-VALUE}).")
    int kvHeads;

    @Option(names = "--attention", paramLabel = "KIND", defaultValue = "flash",
            description = "flash, linear, or stock (DL4J's SelfAttentionLayer, one process only) "
                    + "(default: ${DEFAULT-VALUE}).")
    String attention;

    @Option(names = "--batch", paramLabel = "B", defaultValue = "16",
            description = "Sequences per step (default: ${DEFAULT-VALUE}).")
    int batch;

    @Option(names = "--steps", paramLabel = "STEPS", defaultValue = "800",
            description = "Optimisation steps (default: ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--lr", paramLabel = "RATE", defaultValue = "3e-3",
            description = "Adam learning rate (default: ${DEFAULT-VALUE}).")
    double lr;

    @Option(names = "--seed", paramLabel = "SEED", defaultValue = "1",
            description = "Seed of weights and data (default: ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--workers", paramLabel = "P", defaultValue = "1",
            description = "Worker processes (default: ${DEFAULT-VALUE}).")
    int workers;

    @Option(names = "--strategy", paramLabel = "ALGO", defaultValue = "ring", completionCandidates = StrategyOption.Names.class,
            description = "Sequence-parallel attention: ${COMPLETION-CANDIDATES} (zigzag: ring on the zigzag "
                    + "layout; linear-attention algorithms go with --attention linear; default: ${DEFAULT-VALUE}).")
    String strategy;

    @Option(names = "--zero", paramLabel = "STAGE", defaultValue = "0",
            description = "ZeRO stage 0-3 (default: ${DEFAULT-VALUE}).")
    int zero;

    @Option(names = "--checkpoint-dir", paramLabel = "DIR", description = "Write sharded checkpoints here.")
    Path checkpointDir;

    @Option(names = "--checkpoint-every", paramLabel = "STEPS", defaultValue = "100",
            description = "Steps between checkpoints: OUT/model.zip, and with --checkpoint-dir the sharded ones "
                    + "(default: ${DEFAULT-VALUE}).")
    int checkpointEvery;

    @Option(names = "--resume", description = "Continue from the newest complete checkpoint in --checkpoint-dir.")
    boolean resume;

    @Option(names = "--memory-limit", paramLabel = "SIZE",
            description = "Resident memory above which ND4J's unreachable arrays are collected before more are "
                    + "allocated, and past which the run fails, e.g. 2g (default: the Java heap + 256 MiB + 24 bytes "
                    + "per parameter + per token of a batch 224 bytes per layer and feature and 144 per vocabulary "
                    + "entry, at most 90%% of the machine's memory).")
    String memoryLimit;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/train",
            description = "Where the summary, the model and the loss curve go; made before the first step "
                    + "(default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        Options.outputDirectory("--out", out);
        Options.atLeast("--checkpoint-every", checkpointEvery, 1);
        Options.atLeast("--layers", layers, 1);
        Options.atLeast("--d-model", dModel, 1);
        Options.atLeast("--heads", heads, 1);
        Options.atLeast("--kv-heads", kvHeads, 1);
        if (dModel % heads != 0 || heads % kvHeads != 0) {
            throw new UserInputException("--d-model must be a multiple of --heads and --heads of --kv-heads, got "
                    + dModel + ", " + heads + " and " + kvHeads);
        }
        GptGraph.Attention kind = attentionKind();
        TrainingTask t = task();
        // The name is checked even for one worker: a typo should not pass silently until --workers 2.
        StrategyOption name = StrategyOption.parse(strategy);
        Optional<JobEnvironment> job = JobRank.detect(spec, workers);
        if (job.isPresent()) {
            workers = job.get().worldSize();                 // one rank of a job a scheduler (or launch) started
        }
        ParallelStrategy parallel = workers > 1 ? parallelStrategy(kind, name) : null;
        GptGraph model = new GptGraph(t.vocab(), seqLen, dModel, heads, kvHeads, layers, kind, DataType.FLOAT, lr,
                seed);
        checkSizes(parallel);
        limitMemory(model);
        if (workers > 1 && job.isEmpty()) {
            if (resume) {
                Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
                try {
                    DistributedTrainer.checkResumable(checkpointDir, model.build(), RUN, workers, ZeroStage.of(zero));
                } catch (IllegalArgumentException e) {
                    throw new UserInputException("--resume: " + e.getMessage(), e);
                }
            }
            return launchWorkers(t, model);
        }
        return train(t, model, parallel, job.isEmpty() || job.get().rank() == 0);
    }

    private Integer train(TrainingTask t, GptGraph model, ParallelStrategy parallel, boolean leader)
            throws Exception {
        // Before ND4J allocates anything: a run that cannot even build its model still leaves a summary saying so.
        TrainingRecord record = leader ? new TrainingRecord(out, settings(t, model)) : null;
        List<Double> losses = new ArrayList<>();
        int done = 0;
        int first = 0;
        Progress progress = new Progress(steps, leader);
        AeronTransport transport = null;
        try {
            Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
            // ND4J frees off-heap buffers when the JVM collects their arrays; with a large heap that can be rare, so
            // let its memory manager ask for a collection every second.
            Nd4j.getMemoryManager().togglePeriodicGc(true);
            Nd4j.getMemoryManager().setAutoGcWindow(1000);
            ComputationGraph net = model.build();
            PrintWriter log = spec.commandLine().getOut();
            transport = parallel == null ? null : AeronTransport.fromEnvironment();
            DistributedTrainer trainer = transport == null ? null : trainer(net, transport, parallel);
            first = trainer == null ? 0 : Math.max(0, trainer.resumedFromStep());
            done = first;
            checkpoint(record, net, first);
            Random data = new Random(seed);
            PeakMemory.collectGarbage();
            PeakMemory memory = PeakMemory.start();
            long start = System.nanoTime();
            long documentTokens = 0;
            for (int step = 0; step < steps; step++) {
                DataSet b = t.batch(data, batch, seqLen, DataType.FLOAT);     // every worker draws the same
                if (step < first) {
                    continue;
                }
                double loss;
                documentTokens += realTokens(b);
                if (trainer == null) {
                    try (PackedSequences.Scope p = PackedSequences.enter(Packing.of(b))) {
                        net.fit(b);
                    }
                    loss = perToken(net.score(), b);
                } else {
                    loss = perToken(trainer.fit(b), b);
                }
                losses.add(loss);
                done = step + 1;
                if (record != null) {
                    record.stepDone(done, TrainingRecord.lossResults(losses));
                }
                if (leader) {
                    log.println("step " + step + " loss " + loss);
                    log.flush();
                    progress.update(done, loss, (long) batch * seqLen, System.nanoTime() - start);
                }
                if (done % checkpointEvery == 0 && done < steps) {
                    checkpoint(record, net, done);
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            progress.finish();
            // The model first: whatever fails after it (the curve, the accuracy's passes) leaves the trained model.
            checkpoint(record, net, steps);
            if (leader) {
                record.lossCurve("attn4j train: " + t.name(), curveName(model), first, losses);
                double accuracy = accuracy(net, t, seqLen, batch);
                PeakMemory.Reading peak = memory.stop();
                ObjectNode results = TrainingRecord.lossResults(losses).put("accuracy", accuracy)
                        .put("tokens_per_second", (double) (steps - first) * batch * seqLen / seconds)
                        .put("document_tokens_per_second", documentTokens / seconds).put("seconds", seconds)
                        .put("peak_bytes", peak.peakBytes());
                record.completed(steps, results);
                report(t, losses, accuracy, results, peak);
            }
            return 0;
        } catch (Exception | Error e) {
            progress.finish();                        // the error's line goes on a line of its own
            if (record != null) {
                record.failed(e, "attn4j train: " + t.name(), curveName(model), first, losses);
            }
            throw e;
        } finally {
            if (transport != null) {
                transport.close();
            }
        }
    }

    /**
     * The model after {@code step} steps into the run's record (rank 0; {@code record} is null on the other workers).
     * Every public {@code fit} of the trainer leaves the network whole, at every ZeRO stage.
     */
    private static void checkpoint(TrainingRecord record, ComputationGraph net, int step) throws IOException {
        if (record != null) {
            record.checkpoint(net, step);
        }
    }

    /** What the summary says about the run's settings, from the start. */
    private ObjectNode settings(TrainingTask t, GptGraph model) {
        ObjectNode s = JsonNodeFactory.instance.objectNode();
        s.put("task", t.name()).put("vocab", t.vocab()).put("seq_len", seqLen).put("attention", model.attention()
                .cliName()).put("d_model", dModel).put("heads", heads).put("kv_heads", kvHeads).put("layers", layers)
                .put("batch", batch).put("workers", workers).put("strategy", workers > 1 ? strategy : "none")
                .put("zero", zero).put("steps", steps).put("checkpoint_every", checkpointEvery)
                .put("memory_limit_bytes", Pointer.maxPhysicalBytes()).put("text", text == null ? null
                        : text.toString());
        return s;
    }

    private String curveName(GptGraph model) {
        return model.attention().cliName() + (workers > 1 ? ", " + workers + " workers " + strategy : "");
    }

    /**
     * Bounds the resident memory ({@link MemoryLimit}): with {@code --memory-limit}, or by default what the model
     * and a batch need ({@link #defaultMemoryLimit}); past it, with nothing left to collect, JavaCPP fails with an
     * OutOfMemoryError naming the figures.
     */
    private void limitMemory(GptGraph model) {
        if (memoryLimit != null) {
            MemoryLimit.set(Sizes.parse("--memory-limit", memoryLimit), true);
        } else {
            MemoryLimit.set(defaultMemoryLimit(model, batch, workers), false);
        }
    }

    /**
     * The default bound on the resident memory of one worker training {@code model} on batches of {@code batch}
     * sequences: the Java heap's maximum, 256 MiB for the JVM and ND4J's native code, 24 bytes per parameter, and
     * per token of the worker's share of a batch 224 bytes per layer and model feature plus 144 bytes per vocabulary
     * entry; at most 90 % of the machine's memory, so that a run too large for it fails with JavaCPP's message (and
     * a summary) rather than being killed by the kernel.
     *
     * <p>Why these figures (docs/training.md, "What attn4j train leaves, and its memory bound"): the smallest bound
     * six runs of five settings completed with (vocabulary 256, 4 layers, widths 128 to 512, 512 to 16384 tokens a
     * batch, 0.9 to 15 M parameters) was 181 to 5591 MiB. Less a base of 125 MiB, 16 bytes per parameter (the
     * parameters, their gradients, Adam's two moments) and 95 bytes per token and vocabulary entry (the output
     * layer's logits, softmax, labels, gradient and their 2-d copies; the runs did not vary the vocabulary), it grows
     * with tokens x layers x width: 120 to 152 bytes per unit, the most in the largest run, the activations DL4J
     * keeps for the backward pass and their gradients (some 30 to 38 floats per feature: the block's norms, q, k, v,
     * the attention output, the 4d MLP and its GELU, the residuals, TimeDistributed's copies). The default is 1.5 to
     * 3.4 times each run's need; the heap is counted whole because a user's -Xmx can raise it past the 256 MiB the
     * runs had.
     */
    static long defaultMemoryLimit(GptGraph model, int batch, int workers) {
        long tokens = (long) batch * ((model.maxLength() + workers - 1) / workers);
        long bytes = Runtime.getRuntime().maxMemory() + (256L << 20) + 24 * model.parameterCount()
                + 224 * tokens * model.layers() * model.width() + 144 * tokens * model.vocab();
        long machine = physicalMemory();
        return machine > 0 ? Math.min(bytes, machine / 10 * 9) : bytes;
    }

    /** This machine's (or container's) memory in bytes, or -1 where the JVM cannot tell. */
    private static long physicalMemory() {
        if (java.lang.management.ManagementFactory.getOperatingSystemMXBean()
                instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getTotalMemorySize();
        }
        return -1;
    }

    /**
     * DL4J's score of a sequence output is the loss summed over the scored time steps and averaged over the
     * examples; the mean over the scored tokens reads the same whatever the sequence length (ln V for a model that
     * knows nothing, V the vocabulary).
     */
    static double perToken(double score, DataSet batch) {
        INDArray mask = batch.getLabelsMaskArray();
        long examples = batch.getLabels().size(0);
        double tokens = mask == null ? examples * batch.getLabels().size(2) : mask.sumNumber().doubleValue();
        return tokens == 0 ? score : score * examples / tokens;
    }

    private DistributedTrainer trainer(ComputationGraph net, AeronTransport transport, ParallelStrategy parallel) {
        DistributedTrainer.Builder b = DistributedTrainer.builder(net, transport).strategy(parallel);
        if (checkpointDir != null) {
            b.checkpoints(checkpointDir, checkpointEvery).run(RUN).resume(resume);
        }
        try {
            return b.build();
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage(), e);
        }
    }

    /**
     * Fraction of scored next-token predictions the model gets right on {@value #EVAL_SEQUENCES} fresh sequences,
     * drawn and passed {@code chunk} at a time. With the training batch as the chunk the evaluation fits in what
     * the steps need (measured: docs/training.md); all 64 at once took 32 steps' worth of arrays at --batch 2 and
     * failed a run that had trained all its steps.
     */
    static double accuracy(ComputationGraph net, TrainingTask t, int length, int chunk) {
        Random rnd = new Random(-1);
        double right = 0;
        double scored = 0;
        for (int from = 0; from < EVAL_SEQUENCES; from += chunk) {
            DataSet eval = t.batch(rnd, Math.min(chunk, EVAL_SEQUENCES - from), length, DataType.FLOAT);
            INDArray probabilities;
            try (PackedSequences.Scope p = PackedSequences.enter(Packing.of(eval))) {
                probabilities = net.outputSingle(eval.getFeatures());
            }
            INDArray predicted = probabilities.argMax(1);
            INDArray truth = eval.getLabels().argMax(1);
            INDArray mask = eval.getLabelsMaskArray();
            right += predicted.eq(truth).castTo(DataType.FLOAT).mul(mask).sumNumber().doubleValue();
            scored += mask.sumNumber().doubleValue();
            for (INDArray a : new INDArray[] {probabilities, eval.getLabels(), eval.getFeatures()}) {
                if (a.closeable()) {
                    a.close();
                }
            }
        }
        return right / scored;
    }

    /** The positions of a batch that hold text (not padding): all of them without documents. */
    static long realTokens(DataSet b) {
        Documents d = Packing.of(b);
        if (d == null) {
            return b.getFeatures().size(0) * b.getFeatures().size(2);
        }
        long real = 0;
        for (int i = 0; i < d.batch(); i++) {
            for (int p = 0; p < d.length(); p++) {
                real += d.isPadding(i, p) ? 0 : 1;
            }
        }
        return real;
    }

    private void report(TrainingTask t, List<Double> losses, double accuracy, ObjectNode results,
                        PeakMemory.Reading peak) {
        PrintWriter log = spec.commandLine().getOut();
        log.printf(Locale.ROOT, "done: %s, %d steps, loss %.4f -> %.4f, accuracy %.1f%% on the scored tokens, "
                        + "%.0f tokens/s (%.0f of them text, not padding), %.1f s, peak memory %.0f MB; wrote %s, %s, "
                        + "%s%n", t.name(), losses.size(), losses.isEmpty() ? Double.NaN : losses.get(0),
                losses.isEmpty() ? Double.NaN : losses.get(losses.size() - 1), 100 * accuracy,
                results.get("tokens_per_second").asDouble(), results.get("document_tokens_per_second").asDouble(),
                results.get("seconds").asDouble(), peak.peakBytes() / 1e6, out.resolve(TrainingRecord.CURVE),
                out.resolve(TrainingRecord.SUMMARY), out.resolve(TrainingRecord.MODEL));
        log.flush();
    }

    private Integer launchWorkers(TrainingTask t, GptGraph model) throws IOException, InterruptedException {
        PrintWriter o = spec.commandLine().getOut();
        PrintWriter e = spec.commandLine().getErr();
        Files.createDirectories(out);
        List<String> args = new ArrayList<>(spec.commandLine().getParseResult().originalArgs());  // "train ..."
        LaunchResult r = LocalLauncher.builder(workers, Attn4jCli.class.getName()).args(args).heap("256m")
                .stopGrace(Duration.ofSeconds(30)).output(JobRank.withoutRankPrefix(o), JobRank.withoutRankPrefix(e))
                .build().run();
        if (!r.succeeded()) {
            String failure = "train on " + workers + " workers failed: " + r;
            // Rank 0 says how the run ended unless it was stopped first; then this process says it.
            TrainingRecord.failedIfUnfinished(out, settings(t, model), failure);
            throw new UserInputException(failure);
        }
        return 0;
    }

    private GptGraph.Attention attentionKind() {
        try {
            return GptGraph.Attention.valueOf(attention.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--attention must be flash, linear or stock, got '" + attention + "'");
        }
    }

    private TrainingTask task() throws IOException {
        if (seqLen < 8) {
            throw new UserInputException("--seq-len must be >= 8, got " + seqLen);
        }
        if (pack && pad) {
            throw new UserInputException("--pack and --pad exclude each other: pack documents or pad one per sequence");
        }
        if ((pad || docSeparator != null) && text == null) {
            throw new UserInputException((pad ? "--pad" : "--doc-separator") + " needs --text FILE (the documents)");
        }
        if (docSeparator != null && !pack && !pad) {
            throw new UserInputException("--doc-separator needs --pack or --pad");
        }
        if (docSeparator != null && docSeparator.isEmpty()) {
            throw new UserInputException("--doc-separator must not be empty");
        }
        if (text != null) {
            if (!Files.isRegularFile(text)) {
                throw new UserInputException("--text " + text + ": no such file");
            }
            try {
                return pack || pad ? TrainingTask.textDocuments(text, docSeparator, pack)
                        : TrainingTask.text(text, seqLen);
            } catch (IllegalArgumentException e) {
                throw new UserInputException(e.getMessage(), e);
            }
        }
        TrainingTask t = switch (task.strip().toLowerCase(Locale.ROOT)) {
            case "passkey" -> TrainingTask.passkey(3);
            case "recall" -> TrainingTask.recall(8);
            default -> throw new UserInputException("--task must be passkey or recall, got '" + task + "'");
        };
        if (!pack) {
            return t;
        }
        int shortest = task.strip().equalsIgnoreCase("passkey") ? 10 : 5;   // one sample of the task fits
        if (seqLen + 1 < 2 * shortest) {
            throw new UserInputException("--pack --task " + task + " needs --seq-len >= " + (2 * shortest - 1)
                    + " (two documents of " + shortest + " tokens), got " + seqLen);
        }
        return TrainingTask.packed(t, shortest);
    }

    private ParallelStrategy parallelStrategy(GptGraph.Attention kind, StrategyOption s) {
        if (kind == GptGraph.Attention.STOCK) {
            throw new UserInputException("--attention stock is DL4J's own layer, which cannot run sequence-parallel; "
                    + "use flash or linear with --workers " + workers);
        }
        SequenceAlgorithm algo = s.algo();
        SequenceLayout layout = s.layout();
        String name = s.name();
        if ((kind == GptGraph.Attention.LINEAR) == algo.softmax()) {
            throw new UserInputException("--attention " + kind.cliName() + " needs a " + (algo.softmax()
                    ? "linear-attention strategy (" + SequenceAlgorithm.names(false) + ")"
                    : "softmax strategy (" + SequenceAlgorithm.names(true) + ", zigzag)") + ", got --strategy "
                    + name);
        }
        try {
            return new ParallelStrategy(1, workers, algo, layout, Map.of(), ZeroStage.of(zero));
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage(), e);
        }
    }

    private void checkSizes(ParallelStrategy parallel) {
        if (workers < 1 || workers > 16) {
            throw new UserInputException("--workers must be in [1, 16], got " + workers);
        }
        if (steps < 1 || batch < 1 || !(lr > 0)) {
            throw new UserInputException("--steps, --batch and --lr must be positive, got " + steps + ", " + batch
                    + ", " + lr);
        }
        if (zero < 0 || zero > 3) {
            throw new UserInputException("--zero must be 0, 1, 2 or 3, got " + zero);
        }
        if (resume && checkpointDir == null) {
            throw new UserInputException("--resume needs --checkpoint-dir");
        }
        if (checkpointDir != null && workers == 1) {
            throw new UserInputException("--checkpoint-dir applies to --workers 2 or more (one process: use the "
                    + "saved model.zip)");
        }
        if (parallel != null) {
            SequenceAlgorithm.Settings s = parallel.settings(seqLen, true, 0).withHeads(heads, kvHeads);
            try {
                parallel.algorithm().validate(s);
            } catch (IllegalArgumentException e) {
                throw new UserInputException("--strategy " + strategy + " with --workers " + workers + ": "
                        + e.getMessage());
            }
        }
    }

    /** A one-line progress display on stderr: step, loss, tokens per second, time left. */
    private final class Progress {
        private final int total;
        private final boolean show;
        private long lastPrint;

        Progress(int total, boolean show) {
            this.total = total;
            this.show = show;
        }

        void update(int done, double loss, long tokensPerStep, long elapsedNanos) {
            long now = System.nanoTime();
            if (!show || (now - lastPrint < 500_000_000L && done < total)) {
                return;
            }
            lastPrint = now;
            double seconds = elapsedNanos / 1e9;
            double perStep = seconds / done;
            int width = 24;
            int filled = (int) Math.round(width * (double) done / total);
            PrintWriter e = spec.commandLine().getErr();
            e.printf(Locale.ROOT, "\r[%s%s] step %d/%d loss %.4f %.0f tok/s %s left   ", "#".repeat(filled),
                    ".".repeat(width - filled), done, total, loss, done * tokensPerStep / seconds,
                    clock(perStep * (total - done)));
            e.flush();
        }

        void finish() {
            if (show && lastPrint != 0) {
                lastPrint = 0;
                spec.commandLine().getErr().println();
                spec.commandLine().getErr().flush();
            }
        }

        private String clock(double seconds) {
            long s = Math.round(seconds);
            return String.format(Locale.ROOT, "%d:%02d", s / 60, s % 60);
        }
    }
}
