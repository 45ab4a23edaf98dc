package org.attn4j.samples.hf;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
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
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.models.hf.HfConfig;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.models.hf.HfFineTuner;
import org.attn4j.models.hf.HfTokenizer;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.JobRank;
import org.attn4j.samples.Options;
import org.attn4j.samples.StrategyOption;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.metrics.PeakMemory;
import org.attn4j.samples.train.TrainingRecord;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.node.JsonNodeFactory;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j hf finetune}: fine-tunes every weight of a Hugging Face checkpoint on a text file with
 * {@link HfFineTuner}, on one process or sequence-parallel over {@code --workers} processes, and writes the result
 * back in Hugging Face's layout. Rank 0 prints {@code step n loss v} (the mean cross-entropy per predicted token)
 * every step; before the first step {@code OUT/summary.json} (status "running") and {@code OUT/model} (the model as
 * loaded) exist, and the model is written again every {@code --checkpoint-every} steps and at the end, with
 * {@code OUT/loss.png} ({@link TrainingRecord}).
 *
 * <p>The text is tokenized whole with the model's {@code tokenizer.json} and cut into consecutive sequences of
 * {@code --seq-len} tokens (the rest dropped), as transformers' language-modelling example groups its texts; each
 * step takes {@code --batch} of them, in an order shuffled by {@code --seed} every pass over the text.
 */
@Command(name = "finetune", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Fine-tune a Hugging Face Llama, Mistral or Qwen2 checkpoint on a text file, on one process or",
            "sequence-parallel over worker processes, and save it in Hugging Face's layout."})
public final class FineTuneCommand implements Callable<Integer> {

    /** The run name in the sharded checkpoints. */
    static final String RUN = "attn4j-hf-finetune";
    /** The model directory in OUT. */
    static final String MODEL = "model";

    @Option(names = "--model", paramLabel = "DIR", required = true,
            description = "The checkpoint: config.json, safetensors and tokenizer.json.")
    Path model;

    @Option(names = "--text", paramLabel = "FILE", required = true, description = "A UTF-8 text file to train on.")
    Path text;

    @Option(names = "--seq-len", paramLabel = "N", defaultValue = "1024",
            description = "Tokens per sequence (default: ${DEFAULT-VALUE}).")
    int seqLen;

    @Option(names = "--pack", description = {"Cut the text into documents at blank lines, each followed by the "
            + "model's end-of-text token (eos_token_id), and fill each sequence with consecutive ones: attention stays "
            + "inside each document and no prediction crosses two."})
    boolean pack;

    @Option(names = "--restart-positions", description = "With --pack: RoPE's positions restart at 0 at each "
            + "document (by default they run on through the sequence).")
    boolean restartPositions;

    @Option(names = "--activation-checkpointing", description = "Keep only each decoder block's input from the "
            + "forward pass and recompute the block in the backward pass: activation memory falls to about one "
            + "[batch, hidden, N] array per block, for one more forward pass of the blocks (the losses are the same).")
    boolean activationCheckpointing;

    @Option(names = "--rope-scaling", paramLabel = "TYPE:FACTOR",
            description = "Extend the context: linear, dynamic, yarn or llama3 rotary scaling by FACTOR, trained and "
                    + "saved in OUT/model's config.json with max_position_embeddings times FACTOR (dynamic keeps it).")
    String ropeScaling;

    @Option(names = "--steps", paramLabel = "S", defaultValue = "100",
            description = "Optimisation steps (default: ${DEFAULT-VALUE}).")
    int steps;

    @Option(names = "--batch", paramLabel = "B", defaultValue = "1",
            description = "Sequences per step (default: ${DEFAULT-VALUE}).")
    int batch;

    @Option(names = "--lr", paramLabel = "RATE", defaultValue = "2e-5",
            description = "Peak learning rate of Adam (default: ${DEFAULT-VALUE}).")
    double lr;

    @Option(names = "--warmup", paramLabel = "STEPS", defaultValue = "0",
            description = "Steps of linear warm-up before the cosine decay (default: ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = "--min-lr", paramLabel = "RATE", defaultValue = "0",
            description = "The learning rate the cosine decays to at the last step (default: ${DEFAULT-VALUE}).")
    double minLr;

    @Option(names = "--clip", paramLabel = "NORM", defaultValue = "1.0",
            description = "Clip the gradient's global norm at NORM; 0 does not clip (default: ${DEFAULT-VALUE}).")
    double clip;

    @Option(names = "--workers", paramLabel = "P", defaultValue = "1",
            description = "Worker processes (default: ${DEFAULT-VALUE}).")
    int workers;

    @Option(names = "--strategy", paramLabel = "ALGO", defaultValue = "ring",
            completionCandidates = StrategyOption.Names.class,
            description = "Sequence-parallel attention: ${COMPLETION-CANDIDATES} (default: ${DEFAULT-VALUE}).")
    String strategy;

    @Option(names = "--zero", paramLabel = "STAGE", defaultValue = "0",
            description = "ZeRO stage 0-3 (default: ${DEFAULT-VALUE}).")
    int zero;

    @Option(names = "--dtype", paramLabel = "TYPE", defaultValue = "float32",
            description = "float32 or float64, what the network computes in (default: ${DEFAULT-VALUE}).")
    String dtype;

    @Option(names = "--save-dtype", paramLabel = "TYPE",
            description = "F32 or BF16, the saved weights (default: BF16 for a bfloat16 or float16 checkpoint, "
                    + "else F32).")
    String saveDtype;

    @Option(names = "--seed", paramLabel = "SEED", defaultValue = "1",
            description = "Seed of the order of the sequences (default: ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--checkpoint-every", paramLabel = "STEPS", defaultValue = "100",
            description = "Steps between the saves of OUT/model and, with --checkpoint-dir, of the sharded "
                    + "checkpoints (default: ${DEFAULT-VALUE}).")
    int checkpointEvery;

    @Option(names = "--checkpoint-dir", paramLabel = "DIR",
            description = "Sharded checkpoints (weights and Adam's state) to resume from.")
    Path checkpointDir;

    @Option(names = "--resume", description = "Continue from the newest complete checkpoint in --checkpoint-dir.")
    boolean resume;

    @Option(names = "--out", paramLabel = "DIR", required = true,
            description = "Where the model, the summary and the loss curve go; made before the first step.")
    Path out;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        Options.outputDirectory("--out", out);
        checkOptions();
        DataType type = HfCommand.type(dtype);
        HfConfig config = scaled(HfCommand.config(model));
        String save = saveDtype(config);
        StrategyOption name = StrategyOption.parse(strategy);
        if (!name.algo().softmax()) {
            throw new UserInputException("--strategy " + strategy + " is a linear-attention algorithm; these models "
                    + "use softmax attention: " + SequenceAlgorithm.names(true) + ", zigzag");
        }
        Optional<JobEnvironment> job = JobRank.detect(spec, workers);
        if (job.isPresent()) {
            workers = job.get().worldSize();
        }
        ParallelStrategy parallel;
        try {
            parallel = new ParallelStrategy(1, workers, name.algo(), name.layout(), Map.of(), ZeroStage.of(zero));
            parallel.algorithm().validate(parallel.settings(seqLen, true, 0).withHeads(config.heads(),
                    config.kvHeads()));
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--strategy " + strategy + " with --workers " + workers + ": "
                    + e.getMessage(), e);
        }
        long[] tokens = tokenize(config);
        int sequences = tokens.length / seqLen;
        if (sequences < 1) {
            throw new UserInputException("--text " + text + " holds " + tokens.length + " tokens; --seq-len " + seqLen
                    + " needs at least " + seqLen);
        }
        if (workers > 1 && job.isEmpty()) {
            return launchWorkers(config);
        }
        return train(config, type, save, parallel, tokens, sequences, job.isEmpty() || job.get().rank() == 0);
    }

    private Integer train(HfConfig config, DataType type, String save, ParallelStrategy parallel, long[] tokens,
                          int sequences, boolean leader) throws Exception {
        TrainingRecord record = leader ? new TrainingRecord(out, settings(config, tokens.length, sequences)) : null;
        List<Double> losses = new ArrayList<>();
        int first = 0;
        Transport transport = null;
        try {
            Nd4j.setDefaultDataTypes(type, type);
            HfDecoder decoder = HfCommand.load(model, config, dtype).restartPositionsPerDocument(restartPositions)
                    .activationCheckpointing(activationCheckpointing);
            transport = workers > 1 ? AeronTransport.fromEnvironment()
                    : InJvmTransport.group(1, Duration.ofMinutes(1)).get(0);
            HfFineTuner.Builder b = HfFineTuner.builder(decoder, transport).strategy(parallel).learningRate(lr)
                    .minLearningRate(minLr).warmupSteps(warmup).steps(steps).clipGradientNorm(clip).run(RUN);
            if (checkpointDir != null) {
                b.checkpoints(checkpointDir, checkpointEvery, resume);
            }
            HfFineTuner tuner;
            try {
                tuner = b.build();
            } catch (IllegalArgumentException e) {
                throw new UserInputException(e.getMessage(), e);
            }
            first = tuner.resumedFromStep();
            saveModel(record, decoder, save, first);
            PrintWriter log = spec.commandLine().getOut();
            PeakMemory.collectGarbage();
            PeakMemory memory = PeakMemory.start();
            long start = System.nanoTime();
            for (int step = first; step < steps; step++) {
                DataSet d = HfFineTuner.batch(sequencesOf(tokens, sequences, step),
                        pack ? documentsOf(sequences, step) : null, type);
                double loss = tuner.step(d);
                losses.add(loss);
                if (record != null) {
                    record.stepDone(step + 1, TrainingRecord.lossResults(losses));
                }
                if (leader) {
                    log.println("step " + step + " loss " + loss);
                    log.flush();
                }
                if ((step + 1) % checkpointEvery == 0 && step + 1 < steps) {
                    saveModel(record, decoder, save, step + 1);
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            saveModel(record, decoder, save, steps);
            if (leader) {
                record.lossCurve("attn4j hf finetune: " + text.getFileName(), curveName(config), first, losses);
                PeakMemory.Reading peak = memory.stop();
                ObjectNode results = TrainingRecord.lossResults(losses)
                        .put("tokens_per_second", (double) (steps - first) * batch * seqLen / seconds)
                        .put("seconds", seconds).put("peak_bytes", peak.peakBytes());
                record.completed(steps, results);
                log.printf(Locale.ROOT, "done: %d steps, loss %.4f -> %.4f, %.0f tokens/s, peak memory %.0f MB; "
                                + "wrote %s, %s, %s%n", losses.size(), losses.isEmpty() ? Double.NaN : losses.get(0),
                        losses.isEmpty() ? Double.NaN : losses.get(losses.size() - 1),
                        results.get("tokens_per_second").asDouble(), peak.peakBytes() / 1e6, out.resolve(MODEL),
                        out.resolve(TrainingRecord.SUMMARY), out.resolve(TrainingRecord.CURVE));
                log.flush();
            }
            return 0;
        } catch (Exception | Error e) {
            if (record != null) {
                record.failed(e, "attn4j hf finetune: " + text.getFileName(), curveName(config), first, losses);
            }
            throw e;
        } finally {
            if (transport != null) {
                transport.close();
            }
        }
    }

    /** The {@code batch} sequences of {@code step}: consecutive slots of a per-pass shuffled order. */
    long[][] sequencesOf(long[] tokens, int sequences, int step) {
        long[][] s = new long[batch][];
        for (int i = 0; i < batch; i++) {
            int at = sequenceAt(sequences, step, i);
            s[i] = java.util.Arrays.copyOfRange(tokens, at * seqLen, (at + 1) * seqLen);
        }
        return s;
    }

    /**
     * With --pack, the documents of {@link #sequencesOf}'s sequences: each sequence's documents numbered from 0 in
     * order (a document cut by the sequence's start or end is one of its documents).
     */
    int[][] documentsOf(int sequences, int step) {
        int[][] d = new int[batch][seqLen];
        for (int i = 0; i < batch; i++) {
            int at = sequenceAt(sequences, step, i);
            int first = documents[at * seqLen];
            for (int t = 0; t < seqLen; t++) {
                d[i][t] = documents[at * seqLen + t] - first;
            }
        }
        return d;
    }

    /** The sequence in slot {@code i} of {@code step}'s batch. */
    private int sequenceAt(int sequences, int step, int i) {
        long slot = (long) step * batch + i;
        int pass = (int) (slot / sequences);
        return order(sequences, pass)[(int) (slot % sequences)];
    }

    private int[] cachedOrder;
    private int cachedPass = -1;

    /** The order of the sequences in pass {@code pass} over the text: a shuffle seeded by --seed and the pass. */
    private int[] order(int sequences, int pass) {
        if (pass != cachedPass) {
            int[] o = new int[sequences];
            for (int i = 0; i < sequences; i++) {
                o[i] = i;
            }
            Random r = new Random(seed * 1_000_003L + pass);
            for (int i = sequences - 1; i > 0; i--) {
                int j = r.nextInt(i + 1);
                int t = o[i];
                o[i] = o[j];
                o[j] = t;
            }
            cachedOrder = o;
            cachedPass = pass;
        }
        return cachedOrder;
    }

    /** The text's token ids, checked against the model's vocabulary. */
    private long[] tokenize(HfConfig config) throws IOException {
        if (!Files.isRegularFile(text)) {
            throw new UserInputException("--text " + text + ": no such file");
        }
        Path tokenizer = model.resolve("tokenizer.json");
        if (!Files.isRegularFile(tokenizer)) {
            throw new UserInputException("--model " + model + ": no tokenizer.json to tokenize --text with");
        }
        long[] ids;
        try (HfTokenizer t = HfTokenizer.load(tokenizer)) {
            String all = Files.readString(text, StandardCharsets.UTF_8);
            ids = pack ? packedDocuments(t, all, config) : t.encode(all);
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--model " + model + ": " + e.getMessage(), e);
        } catch (java.nio.charset.MalformedInputException e) {
            throw new UserInputException("--text " + text + ": not UTF-8 text", e);
        }
        for (long id : ids) {
            if (id < 0 || id >= config.vocab()) {
                throw new UserInputException("--model " + model + ": tokenizer.json gives id " + id + ", outside the "
                        + "model's vocabulary of " + config.vocab());
            }
        }
        return ids;
    }

    /** With --pack, the document of each token of the text (in order). */
    private int[] documents;

    /**
     * The text's documents (cut at blank lines, blank ones dropped), each tokenized alone and followed by the
     * model's {@code eos_token_id} if its config names one, one after another; their numbers go to
     * {@link #documents}.
     */
    private long[] packedDocuments(HfTokenizer t, String all, HfConfig config) {
        JsonNode eosNode = config.json().path("eos_token_id");
        long eos = eosNode.isArray() ? eosNode.path(0).asLong(-1) : eosNode.asLong(-1);
        List<long[]> docs = new ArrayList<>();
        int total = 0;
        for (String part : all.split("\\R[ \\t]*\\R\\s*")) {
            if (!part.isBlank()) {
                long[] d = t.encode(part.strip());
                if (eos >= 0) {
                    d = java.util.Arrays.copyOf(d, d.length + 1);
                    d[d.length - 1] = eos;
                }
                docs.add(d);
                total += d.length;
            }
        }
        if (docs.isEmpty()) {
            throw new UserInputException("--text " + text + " holds no document (--pack cuts it at blank lines)");
        }
        long[] ids = new long[total];
        documents = new int[total];
        int at = 0;
        for (int k = 0; k < docs.size(); k++) {
            long[] d = docs.get(k);
            System.arraycopy(d, 0, ids, at, d.length);
            java.util.Arrays.fill(documents, at, at + d.length, k);
            at += d.length;
        }
        return ids;
    }

    /** Rank 0 writes the model of {@code step} to OUT/model in Hugging Face's layout, its tokenizer beside it. */
    private void saveModel(TrainingRecord record, HfDecoder decoder, String save, int step) throws IOException {
        if (record == null) {
            return;
        }
        record.checkpoint(MODEL, dir -> {
            decoder.save(dir, save, 2L << 30);
            HfDecoder.copyTokenizerFiles(model, dir);
        }, step);
    }

    /** The checkpoint's configuration with --rope-scaling applied, or as it is without. */
    private HfConfig scaled(HfConfig config) {
        if (ropeScaling == null) {
            return config;
        }
        String[] f = ropeScaling.strip().split(":", -1);
        RotaryEmbedding.Scaling type;
        double factor;
        try {
            if (f.length != 2) {
                throw new IllegalArgumentException("no colon between them");
            }
            type = RotaryEmbedding.Scaling.ofHfName(f[0].strip().toLowerCase(Locale.ROOT));
            factor = Double.parseDouble(f[1].strip());
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--rope-scaling must be TYPE:FACTOR with TYPE linear, dynamic, yarn or "
                    + "llama3 and FACTOR a number above 1 (for example yarn:4), got " + ropeScaling, e);
        }
        try {
            return config.withRopeScaling(type, factor);
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--rope-scaling " + ropeScaling + ": " + e.getMessage(), e);
        }
    }

    private String saveDtype(HfConfig config) {
        if (saveDtype != null) {
            String s = saveDtype.strip().toUpperCase(Locale.ROOT);
            if (!s.equals("F32") && !s.equals("BF16")) {
                throw new UserInputException("--save-dtype must be F32 or BF16, got " + saveDtype);
            }
            return s;
        }
        String d = config.json().path("dtype").asText(config.json().path("torch_dtype").asText(""));
        return d.equals("bfloat16") || d.equals("float16") ? "BF16" : "F32";
    }

    private void checkOptions() {
        Options.atLeast("--steps", steps, 1);
        Options.atLeast("--batch", batch, 1);
        Options.atLeast("--seq-len", seqLen, 2);
        Options.atLeast("--checkpoint-every", checkpointEvery, 1);
        Options.atLeast("--warmup", warmup, 0);
        if (!(lr > 0) || Double.isInfinite(lr)) {
            throw new UserInputException("--lr must be positive, got " + lr);
        }
        if (!(minLr >= 0 && minLr <= lr)) {
            throw new UserInputException("--min-lr must be in [0, --lr = " + lr + "], got " + minLr);
        }
        if (!(clip >= 0) || Double.isInfinite(clip)) {
            throw new UserInputException("--clip must be >= 0 (0 = no clipping), got " + clip);
        }
        if (warmup > 0 && warmup >= steps) {
            throw new UserInputException("--warmup must be fewer than --steps, got " + warmup + " of " + steps);
        }
        if (workers < 1 || workers > 16) {
            throw new UserInputException("--workers must be in [1, 16], got " + workers);
        }
        if (zero < 0 || zero > 3) {
            throw new UserInputException("--zero must be 0, 1, 2 or 3, got " + zero);
        }
        if (restartPositions && !pack) {
            throw new UserInputException("--restart-positions needs --pack (positions restart at each packed "
                    + "document)");
        }
        if (resume && checkpointDir == null) {
            throw new UserInputException("--resume needs --checkpoint-dir");
        }
    }

    private ObjectNode settings(HfConfig config, int tokens, int sequences) {
        ObjectNode s = JsonNodeFactory.instance.objectNode();
        s.put("model", model.toString()).put("model_type", config.modelType()).put("text", text.toString())
                .put("text_tokens", tokens).put("sequences", sequences).put("seq_len", seqLen).put("batch", batch)
                .put("steps", steps).put("lr", lr).put("warmup", warmup).put("min_lr", minLr).put("clip", clip)
                .put("workers", workers).put("strategy", workers > 1 ? strategy : "none").put("zero", zero)
                .put("dtype", dtype).put("seed", seed).put("pack", pack).put("restart_positions", restartPositions)
                .put("activation_checkpointing", activationCheckpointing)
                .put("rope_scaling", ropeScaling == null ? "none" : ropeScaling)
                .put("max_position_embeddings", config.maxPositions());
        return s;
    }

    private String curveName(HfConfig config) {
        return config.modelType() + (workers > 1 ? ", " + workers + " workers " + strategy : "");
    }

    private Integer launchWorkers(HfConfig config) throws IOException, InterruptedException {
        Files.createDirectories(out);
        List<String> args = new ArrayList<>(spec.commandLine().getParseResult().originalArgs());  // "hf finetune ..."
        LaunchResult r = LocalLauncher.builder(workers, Attn4jCli.class.getName()).args(args).heap("1g")
                .stopGrace(Duration.ofSeconds(30)).output(JobRank.withoutRankPrefix(spec.commandLine().getOut()),
                        JobRank.withoutRankPrefix(spec.commandLine().getErr())).build().run();
        if (!r.succeeded()) {
            String failure = "hf finetune on " + workers + " workers failed: " + r;
            TrainingRecord.failedIfUnfinished(out, settings(config, 0, 0), failure);
            throw new UserInputException(failure);
        }
        return 0;
    }

}
