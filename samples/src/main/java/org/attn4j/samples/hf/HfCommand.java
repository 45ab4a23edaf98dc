package org.attn4j.samples.hf;

import java.io.File;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.launch.JobEnvironment;
import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.training.DistributedDecoder;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.models.hf.HfConfig;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.models.hf.HfTokenizer;
import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.JobRank;
import org.attn4j.samples.StrategyOption;
import org.attn4j.samples.UserInputException;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j hf}: Hugging Face Llama-family checkpoints (docs/models.md): {@code logits} of token ids,
 * {@code generate} with the key/value cache, {@code tokenize} with the model's tokenizer, {@code finetune} on a text
 * file ({@link FineTuneCommand}).
 */
@Command(name = "hf", mixinStandardHelpOptions = true,
        description = "Run Hugging Face Llama, Mistral and Qwen2 checkpoints (docs/models.md).",
        subcommands = {HfCommand.Logits.class, HfCommand.Generate.class, HfCommand.Tokenize.class,
            FineTuneCommand.class})
public final class HfCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new picocli.CommandLine.ParameterException(spec.commandLine(), "missing subcommand; one of "
                + String.join(", ", spec.subcommands().keySet()));
    }

    /** The network type of {@code --dtype}. */
    static DataType type(String dtype) {
        return switch (dtype.toLowerCase(Locale.ROOT)) {
            case "float32" -> DataType.FLOAT;
            case "float64" -> DataType.DOUBLE;
            default -> throw new UserInputException("--dtype must be float32 or float64, got " + dtype);
        };
    }

    /** The configuration of the model at {@code dir}, or one line saying what is wrong with it. */
    static HfConfig config(Path dir) throws IOException {
        try {
            return HfConfig.read(dir);
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage());
        }
    }

    /** The model at {@code dir}, or one line saying what is wrong with it. */
    static HfDecoder load(Path dir, String dtype) throws IOException {
        try {
            return HfDecoder.load(dir, type(dtype));
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage());
        }
    }

    /** The weights at {@code dir} in the network of {@code config}, or one line saying what is wrong with them. */
    static HfDecoder load(Path dir, HfConfig config, String dtype) throws IOException {
        try {
            return HfDecoder.load(dir, config, type(dtype));
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage());
        }
    }

    /** Integer ids of an .npy file of {@code rank} dimensions, or one line saying what came instead. */
    static INDArray ids(Path file, int rank, String option) {
        if (!Files.isRegularFile(file)) {
            throw new UserInputException(option + " " + file + ": no such file");
        }
        INDArray a;
        try {
            a = Nd4j.createFromNpyFile(new File(file.toString()));
        } catch (RuntimeException e) {
            throw new UserInputException(option + " " + file + ": not an .npy file ND4J reads: " + e.getMessage());
        }
        if (a.rank() != rank || !a.dataType().isIntType()) {
            throw new UserInputException(option + " " + file + ": expected integer token ids of " + rank
                    + " dimensions, got " + a.dataType() + " " + Arrays.toString(a.shape()));
        }
        return a;
    }

    /** Writes {@code a} as {@code file} through a temporary file moved into place; returns {@code file}. */
    static Path writeNpy(INDArray a, Path file) throws IOException {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Nd4j.writeAsNumpy(a, new File(tmp.toString()));
        Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        return file;
    }

    /** {@code attn4j hf logits}. */
    @Command(name = "logits", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"Write the logits [B, N, vocab] of int64 token ids [B, N] as OUT/logits.npy (float32).",
                "With --workers P the forward pass runs sequence-parallel over P worker processes; rank 0 writes."})
    public static final class Logits implements Callable<Integer> {
        @Option(names = "--model", paramLabel = "DIR", required = true,
                description = "A Hugging Face model directory (config.json, safetensors).")
        Path model;

        @Option(names = "--tokens", paramLabel = "T.npy", required = true, description = "Token ids [B, N].")
        Path tokens;

        @Option(names = "--out", paramLabel = "OUT", required = true, description = "Output directory.")
        Path out;

        @Option(names = "--dtype", paramLabel = "TYPE", defaultValue = "float32",
                description = "float32 or float64 (default: ${DEFAULT-VALUE}).")
        String dtype;

        @Option(names = "--workers", paramLabel = "P", defaultValue = "1",
                description = "Worker processes to shard the sequence over (default: ${DEFAULT-VALUE}).")
        int workers;

        @Option(names = "--strategy", paramLabel = "ALGO", defaultValue = "ring",
                completionCandidates = StrategyOption.Names.class,
                description = "Sequence-parallel attention with --workers: ${COMPLETION-CANDIDATES} (softmax "
                        + "algorithms; default: ${DEFAULT-VALUE}).")
        String strategy;

        @Spec
        CommandSpec spec;

        @Override
        public Integer call() throws IOException, InterruptedException {
            INDArray ids = ids(tokens, 2, "--tokens");
            HfConfig config = config(model);
            long vocab = config.vocab();
            long largest = ids.maxNumber().longValue();
            if (ids.minNumber().longValue() < 0 || largest >= vocab) {
                throw new UserInputException("--tokens " + tokens + ": ids must be in [0, " + vocab + "), got "
                        + ids.minNumber() + " to " + largest);
            }
            type(dtype);
            Optional<JobEnvironment> job = JobRank.detect(spec, workers);
            int p = job.map(JobEnvironment::worldSize).orElse(workers);
            if (p < 1 || p > 64) {
                throw new UserInputException("--workers must be in [1, 64], got " + p);
            }
            ParallelStrategy parallel = p == 1 ? null : strategy(p, config, Math.toIntExact(ids.size(1)));
            if (p > 1 && job.isEmpty()) {
                return launch(p);
            }
            HfDecoder m = load(model, dtype);
            INDArray logits;
            boolean writes = true;
            if (parallel == null) {
                logits = m.logits(ids);
            } else {
                try (AeronTransport t = AeronTransport.fromEnvironment()) {
                    INDArray in = ids.reshape(ids.size(0), 1, ids.size(1));
                    INDArray timeLast = DistributedDecoder.of(m.graph(), t, parallel).forward(in,
                            x -> m.logits(x.reshape(x.size(0), x.size(2))).permute(0, 2, 1));
                    logits = timeLast.permute(0, 2, 1);
                    writes = t.rank() == 0;
                    Communicator.world(t).barrier();      // no rank closes while another still receives
                }
            }
            if (!writes) {
                return 0;
            }
            logits = logits.castTo(DataType.FLOAT).dup('c');
            Files.createDirectories(out);
            Path file = writeNpy(logits, out.resolve("logits.npy"));
            PrintWriter o = spec.commandLine().getOut();
            o.println("wrote " + file + " " + Arrays.toString(logits.shape()));
            o.flush();
            return 0;
        }

        /** The strategy over {@code p} workers, checked against the model and the sequence length. */
        private ParallelStrategy strategy(int p, HfConfig c, int n) {
            StrategyOption s = StrategyOption.parse(strategy);
            if (!s.algo().softmax()) {
                throw new UserInputException("--strategy " + s.name() + " is a linear-attention algorithm; these "
                        + "models need a softmax one (" + SequenceAlgorithm.names(true) + ", zigzag)");
            }
            ParallelStrategy parallel;
            try {
                parallel = new ParallelStrategy(1, p, s.algo(), s.layout(), Map.of(), ZeroStage.NONE);
                parallel.algorithm().validate(parallel.settings(n, true, 0).withHeads(c.heads(), c.kvHeads()));
            } catch (IllegalArgumentException e) {
                throw new UserInputException("--strategy " + s.name() + " with --workers " + p + " and N = " + n
                        + ": " + e.getMessage());
            }
            int parts = parallel.effectiveLayout(true) == SequenceLayout.ZIGZAG ? 2 * p : p;
            if (n % parts != 0) {
                throw new UserInputException("--tokens " + tokens + ": N = " + n + " must be a multiple of " + parts
                        + " to shard over " + p + " workers with --strategy " + s.name());
            }
            return parallel;
        }

        /** Runs this command in {@code p} worker processes; rank 0 writes. */
        private Integer launch(int p) throws IOException, InterruptedException {
            List<String> args = new ArrayList<>(spec.commandLine().getParseResult().originalArgs());
            Map<Integer, String> lastError = new ConcurrentHashMap<>();
            PrintWriter o = spec.commandLine().getOut();
            LaunchResult r = LocalLauncher.builder(p, Attn4jCli.class.getName()).args(args).heap("1g")
                    .stopGrace(Duration.ofSeconds(30)).output(line -> {
                        if (line.startsWith("[rank 0] ")) {
                            synchronized (o) {
                                o.println(line.substring("[rank 0] ".length()));
                                o.flush();
                            }
                        }
                    }, line -> {
                        int at = line.indexOf("] ");
                        if (line.startsWith("[rank ") && at > 0) {
                            lastError.put(Integer.parseInt(line.substring(6, at)), line.substring(at + 2));
                        }
                    }).build().run();
            if (!r.succeeded()) {
                int rank = r.firstFailedRank();
                String why = rank >= 0 && lastError.containsKey(rank) ? "rank " + rank + ": " + lastError.get(rank)
                        : r.toString();
                throw new UserInputException("logits on " + p + " workers failed: " + why);
            }
            return 0;
        }
    }

    /** {@code attn4j hf tokenize}. */
    @Command(name = "tokenize", mixinStandardHelpOptions = true, sortOptions = false,
            description = "Print the ids of TEXT under the model's tokenizer.json, separated by spaces.")
    public static final class Tokenize implements Callable<Integer> {
        @Option(names = "--model", paramLabel = "DIR", required = true,
                description = "A directory with tokenizer.json.")
        Path model;

        @Option(names = "--text", paramLabel = "TEXT", required = true, description = "The text.")
        String text;

        @Spec
        CommandSpec spec;

        @Override
        public Integer call() throws IOException {
            try (HfTokenizer t = tokenizer(model)) {
                StringBuilder line = new StringBuilder();
                for (long id : t.encode(text)) {
                    line.append(line.length() == 0 ? "" : " ").append(id);
                }
                spec.commandLine().getOut().println(line);
                spec.commandLine().getOut().flush();
            }
            return 0;
        }
    }

    static HfTokenizer tokenizer(Path dir) throws IOException {
        try {
            return HfTokenizer.load(dir);
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage());
        }
    }

    /** {@code attn4j hf generate}. */
    @Command(name = "generate", mixinStandardHelpOptions = true, sortOptions = false,
            description = "Continue a prompt with the key/value cache; print the text when the model has a "
                    + "tokenizer.")
    public static final class Generate implements Callable<Integer> {
        @Option(names = "--model", paramLabel = "DIR", required = true,
                description = "A Hugging Face model directory (config.json, safetensors, tokenizer.json).")
        Path model;

        @Option(names = "--prompt", paramLabel = "TEXT", description = "The text to continue (needs tokenizer.json).")
        String prompt;

        @Option(names = "--prompt-tokens", paramLabel = "P.npy", description = "The prompt as token ids [1, n].")
        Path promptTokens;

        @Option(names = "--max-new-tokens", paramLabel = "K", required = true, description = "Tokens to generate.")
        int maxNewTokens;

        @Option(names = "--temperature", paramLabel = "T", defaultValue = "0",
                description = "Sampling temperature, 0 for the most likely token (default: ${DEFAULT-VALUE}).")
        double temperature;

        @Option(names = "--top-k", paramLabel = "K", defaultValue = "0",
                description = "Sample among the K most likely tokens, 0 for all (default: ${DEFAULT-VALUE}).")
        int topK;

        @Option(names = "--top-p", paramLabel = "P", defaultValue = "1",
                description = "Sample among the most likely tokens whose probabilities add up to P (default: "
                        + "${DEFAULT-VALUE}).")
        double topP;

        @Option(names = "--seed", paramLabel = "S", defaultValue = "1", description = "Sampling seed (default: "
                + "${DEFAULT-VALUE}).")
        long seed;

        @Option(names = "--dtype", paramLabel = "TYPE", defaultValue = "float32",
                description = "float32 or float64 (default: ${DEFAULT-VALUE}).")
        String dtype;

        @Option(names = "--out", paramLabel = "OUT", description = "Also write OUT/generated.npy (int64 [1, K]).")
        Path out;

        @Spec
        CommandSpec spec;

        @Override
        public Integer call() throws IOException {
            if ((prompt == null) == (promptTokens == null)) {
                throw new UserInputException("give one of --prompt TEXT and --prompt-tokens P.npy");
            }
            if (maxNewTokens < 1 || temperature < 0 || topK < 0 || !(topP > 0 && topP <= 1)) {
                throw new UserInputException("--max-new-tokens must be >= 1, --temperature >= 0, --top-k >= 0 and "
                        + "--top-p in (0, 1]; got " + maxNewTokens + ", " + temperature + ", " + topK + ", " + topP);
            }
            HfTokenizer tokenizer = Files.isRegularFile(model.resolve("tokenizer.json")) ? tokenizer(model) : null;
            long[] start;
            if (prompt != null) {
                if (tokenizer == null) {
                    throw new UserInputException("--prompt needs " + model.resolve("tokenizer.json")
                            + "; give --prompt-tokens instead");
                }
                start = tokenizer.encode(prompt);
            } else {
                INDArray p = ids(promptTokens, 2, "--prompt-tokens");
                if (p.size(0) != 1) {
                    throw new UserInputException("--prompt-tokens " + promptTokens + ": expected one sequence [1, n], "
                            + "got " + Arrays.toString(p.shape()));
                }
                start = p.toLongVector();
            }
            if (start.length == 0) {
                throw new UserInputException("the prompt has no tokens");
            }
            HfDecoder m = load(model, dtype);
            long[] generated;
            try {
                generated = m.generate(start, maxNewTokens, temperature, topK, topP, seed);
            } catch (IllegalArgumentException e) {
                throw new UserInputException(e.getMessage());
            }
            PrintWriter o = spec.commandLine().getOut();
            if (tokenizer != null) {
                o.println(tokenizer.decode(generated));
                tokenizer.close();
            } else {
                o.println(Arrays.toString(generated));
            }
            if (out != null) {
                Files.createDirectories(out);
                writeNpy(Nd4j.createFromArray(new long[][] {generated}), out.resolve("generated.npy"));
            }
            o.flush();
            return 0;
        }
    }

}
