package org.attn4j.spark;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;

import org.apache.spark.api.java.JavaSparkContext;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.models.hf.HfConfig;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.models.hf.HfFineTuner;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Fine-tunes a Hugging Face checkpoint in a Spark barrier stage: one task per worker of the strategy, each loading the
 * checkpoint from a directory every executor reads (a shared file system), training it with {@link HfFineTuner}
 * (Adam on a warm-up and cosine schedule, global-norm clipping, the mean loss per predicted token) sequence-parallel
 * and data-parallel over the tasks, as {@code hf finetune} does over worker processes; rank 0 writes the tuned model
 * in Hugging Face's layout to a directory the driver names.
 * <pre>
 *   SparkHfFineTuner.Result r = SparkHfFineTuner.builder(modelDir, ParallelStrategy.sequence("ring", 4))
 *           .learningRate(2e-5).warmupSteps(10).steps(200).output(outDir, "BF16").build()
 *           .fit(sparkContext, step -> mySequences(step));       // long[B][N] token ids, the same on every task
 *   r.losses();                                                  // rank 0's loss of every step
 * </pre>
 * A failed task fails the stage with its error and Spark retries it as {@link SparkSequenceParallel} describes; a
 * retry starts again from the checkpoint in the model directory.
 */
public final class SparkHfFineTuner implements Serializable {

    private static final long serialVersionUID = 1L;

    /** What every task reads: the whole batch of a step, as token ids {@code [B][N]} (each group takes its share). */
    @FunctionalInterface
    public interface SequenceSource extends Serializable {
        /**
         * @param step the step, from 0
         * @return the step's sequences, B of N tokens, the same for every step's call on every executor
         */
        long[][] sequences(int step);
    }

    /**
     * What a run returns.
     *
     * @param losses rank 0's loss of every step (the mean cross-entropy per predicted token of the whole batch)
     * @param output the directory rank 0 wrote the model to, or null if none was given
     */
    public record Result(double[] losses, Path output) {
    }

    private final String model;
    private final SparkSequenceParallel.StrategySpec strategy;
    private final int steps;
    private final double learningRate;
    private final double minLearningRate;
    private final int warmupSteps;
    private final double clip;
    private final boolean doublePrecision;
    private final String output;
    private final String saveDtype;
    private final Duration timeout;
    private final String ropeScaling;
    private final double ropeFactor;

    private SparkHfFineTuner(Builder b) {
        this.model = b.model.toAbsolutePath().toString();
        this.strategy = SparkSequenceParallel.StrategySpec.of(b.strategy);
        this.steps = b.steps;
        this.learningRate = b.learningRate;
        this.minLearningRate = b.minLearningRate;
        this.warmupSteps = b.warmupSteps;
        this.clip = b.clip;
        this.doublePrecision = b.type == DataType.DOUBLE;
        this.output = b.output == null ? null : b.output.toAbsolutePath().toString();
        this.saveDtype = b.saveDtype;
        this.timeout = b.timeout;
        this.ropeScaling = b.ropeScaling == null ? null : b.ropeScaling.name();
        this.ropeFactor = b.ropeFactor;
    }

    /**
     * A run that tunes the checkpoint in {@code modelDir} (config.json and safetensors) over the workers of
     * {@code strategy}.
     *
     * @throws IllegalArgumentException one line if the directory holds no readable Llama-family config
     */
    public static Builder builder(Path modelDir, ParallelStrategy strategy) {
        return new Builder(modelDir, strategy);
    }

    /**
     * Runs the barrier stage and waits for it.
     *
     * @param sc   the application's context; it needs a free task slot per worker
     * @param data what every task reads
     * @throws IllegalArgumentException if the cluster offers fewer slots than workers, before anything is submitted
     */
    public Result fit(JavaSparkContext sc, SequenceSource data) {
        SparkSequenceParallel.TaskResult[] results = SparkSequenceParallel.runBarrier(sc, strategy, timeout,
                new Work(this, data));
        return new Result(results[0].losses(), output == null ? null : Paths.get(output));
    }

    /** One task's fine-tuning. */
    private record Work(SparkHfFineTuner run, SequenceSource data) implements TrainingTask.Work {

        @Override
        public SparkSequenceParallel.TaskResult run(AeronTransport transport, int rank, ParallelStrategy s) {
            DataType type = run.doublePrecision ? DataType.DOUBLE : DataType.FLOAT;
            Nd4j.setDefaultDataTypes(type, type);
            HfDecoder decoder;
            try {
                HfConfig config = HfConfig.read(Paths.get(run.model));
                if (run.ropeScaling != null) {
                    config = config.withRopeScaling(RotaryEmbedding.Scaling.valueOf(run.ropeScaling), run.ropeFactor);
                }
                decoder = HfDecoder.load(Paths.get(run.model), config, type);
            } catch (IOException e) {
                throw new UncheckedIOException("SparkHfFineTuner rank " + rank + ": reading " + run.model, e);
            }
            HfFineTuner tuner = HfFineTuner.builder(decoder, transport).strategy(s).learningRate(run.learningRate)
                    .minLearningRate(run.minLearningRate).warmupSteps(run.warmupSteps).steps(run.steps)
                    .clipGradientNorm(run.clip).build();
            double[] losses = new double[run.steps];
            for (int step = 0; step < run.steps; step++) {
                losses[step] = tuner.step(HfFineTuner.batch(data.sequences(step), type));
            }
            if (rank == 0 && run.output != null) {
                save(decoder, Paths.get(run.model), Paths.get(run.output), run.saveDtype);
            }
            return new SparkSequenceParallel.TaskResult(rank, losses, null);
        }
    }

    private static void save(HfDecoder decoder, Path from, Path to, String dtype) {
        try {
            decoder.save(to, dtype, 2L << 30);
            HfDecoder.copyTokenizerFiles(from, to);
        } catch (IOException e) {
            throw new UncheckedIOException("SparkHfFineTuner rank 0: writing the model to " + to, e);
        }
    }

    /** Settings of a run; the defaults are those of {@code hf finetune}. */
    public static final class Builder {
        private final Path model;
        private final ParallelStrategy strategy;
        private int steps = 100;
        private double learningRate = 2e-5;
        private double minLearningRate;
        private int warmupSteps;
        private double clip = 1.0;
        private DataType type = DataType.FLOAT;
        private Path output;
        private String saveDtype = "F32";
        private Duration timeout = Duration.ofSeconds(60);
        private RotaryEmbedding.Scaling ropeScaling;
        private double ropeFactor;
        private HfConfig config;

        private Builder(Path model, ParallelStrategy strategy) {
            if (strategy == null) {
                throw new IllegalArgumentException("SparkHfFineTuner: strategy is null");
            }
            try {
                config = HfConfig.read(model);
            } catch (IOException e) {
                throw new UncheckedIOException("SparkHfFineTuner: reading " + model, e);
            }
            this.model = model;
            this.strategy = strategy;
        }

        /** Optimisation steps (default 100). */
        public Builder steps(int steps) {
            if (steps < 1) {
                throw new IllegalArgumentException("SparkHfFineTuner: steps must be >= 1, got " + steps);
            }
            this.steps = steps;
            return this;
        }

        /** Adam's peak learning rate (default 2e-5). */
        public Builder learningRate(double rate) {
            this.learningRate = rate;
            return this;
        }

        /** The rate the cosine decays to at the last step (default 0). */
        public Builder minLearningRate(double rate) {
            this.minLearningRate = rate;
            return this;
        }

        /** Steps of linear warm-up (default 0). */
        public Builder warmupSteps(int steps) {
            this.warmupSteps = steps;
            return this;
        }

        /** Clips the gradient's global norm at {@code norm}; 0 does not clip (default 1.0). */
        public Builder clipGradientNorm(double norm) {
            this.clip = norm;
            return this;
        }

        /** FLOAT (default) or DOUBLE, what the tasks compute in. */
        public Builder dataType(DataType type) {
            if (type != DataType.FLOAT && type != DataType.DOUBLE) {
                throw new IllegalArgumentException("SparkHfFineTuner: data type must be FLOAT or DOUBLE, got " + type);
            }
            this.type = type;
            return this;
        }

        /** Rank 0 writes the tuned model here in Hugging Face's layout, its weights in {@code dtype} (F32, BF16). */
        public Builder output(Path dir, String dtype) {
            if (!"F32".equals(dtype) && !"BF16".equals(dtype)) {
                throw new IllegalArgumentException("SparkHfFineTuner: save dtype must be F32 or BF16, got " + dtype);
            }
            this.output = dir;
            this.saveDtype = dtype;
            return this;
        }

        /**
         * Extends the context by rotary scaling, as {@code hf finetune --rope-scaling} does: trained with it, and
         * saved in the output's config.json ({@link HfConfig#withRopeScaling}).
         *
         * @throws IllegalArgumentException one line if the checkpoint cannot take that scaling
         */
        public Builder ropeScaling(RotaryEmbedding.Scaling type, double factor) {
            config.withRopeScaling(type, factor);
            this.ropeScaling = type;
            this.ropeFactor = factor;
            return this;
        }

        /** How long a worker waits for another before failing, naming it (default 60 s). */
        public Builder timeout(Duration timeout) {
            if (timeout == null || timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("SparkHfFineTuner: timeout must be positive, got " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /** The run. */
        public SparkHfFineTuner build() {
            return new SparkHfFineTuner(this);
        }
    }
}
