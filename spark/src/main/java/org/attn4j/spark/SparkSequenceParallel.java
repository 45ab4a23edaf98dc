package org.attn4j.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.stream.IntStream;

import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.util.ModelSerializer;
import org.nd4j.linalg.dataset.DataSet;

import scala.reflect.ClassTag$;

/**
 * Sequence-parallel training of a DL4J network as one Apache Spark barrier stage: W tasks start together, task
 * {@code i} is rank {@code i}, each binds an Aeron endpoint on its executor's address, the tasks exchange their
 * endpoints with {@code BarrierTaskContext.allGather} (the rendezvous), and each trains with
 * {@link org.attn4j.distributed.training.DistributedTrainer} under the given {@link ParallelStrategy}: any
 * sequence-parallel algorithm, a data x sequence grid, a ZeRO stage.
 * <pre>
 *   SparkSequenceParallel.Result r = SparkSequenceParallel.builder(conf, strategy).steps(200).build()
 *           .fit(sparkContext, (step, group, groups) -> myBatch(step, group, groups));
 *   r.losses();  r.model();                             // rank 0's losses, the trained network
 * </pre>
 * Data: each task reads only its own data-parallel group's examples of each step, from a {@link BatchSource} that
 * Spark ships to the executors (a seeded generator, a file or table per group); the members of one sequence group
 * read the same examples and each keeps the time steps of its shard.
 *
 * <p>A task that fails fails the stage with its error: the others find it silent within the transport timeout and
 * stop. Spark then retries the whole barrier stage (up to {@code spark.task.maxFailures} / the stage attempt limit),
 * and the retried tasks meet under a job token of their own attempt.
 */
public final class SparkSequenceParallel implements Serializable {

    private static final long serialVersionUID = 1L;

    /** What a task reads: its data-parallel group's examples of one step (serialised to the executors). */
    @FunctionalInterface
    public interface BatchSource extends Serializable {
        /**
         * @param step   the step, from 0
         * @param group  this task's data-parallel group, {@code 0 .. groups-1}
         * @param groups the data-parallel groups
         * @return the group's examples (the same number for every group and step)
         */
        DataSet batch(int step, int group, int groups);
    }

    /**
     * What a run returns: rank 0's loss of every step and the trained network, restored from rank 0's bytes.
     *
     * @param losses the whole batch's score of each step
     * @param model  a MultiLayerNetwork or ComputationGraph, like the configuration
     */
    public record Result(double[] losses, Model model) {
    }

    private final String configuration;
    private final boolean graph;
    private final StrategySpec strategy;
    private final int steps;
    private final Duration timeout;
    private final Path modelPath;

    private SparkSequenceParallel(Builder b) {
        this.configuration = b.configuration;
        this.graph = b.graph;
        this.strategy = StrategySpec.of(b.strategy);
        this.steps = b.steps;
        this.timeout = b.timeout;
        this.modelPath = b.modelPath;
    }

    /** A run of a MultiLayerNetwork with attn4j layers. */
    public static Builder builder(MultiLayerConfiguration conf, ParallelStrategy strategy) {
        return new Builder(conf.toJson(), false, strategy);
    }

    /** A run of a ComputationGraph with attn4j layers. */
    public static Builder builder(ComputationGraphConfiguration conf, ParallelStrategy strategy) {
        return new Builder(conf.toJson(), true, strategy);
    }

    /**
     * Runs the barrier stage of {@code W = strategy.worldSize()} tasks and waits for it.
     *
     * @param sc   the application's context; it needs W free task slots
     * @param data what each task reads
     * @return rank 0's losses and the trained network (also written to the model path, if one was given)
     * @throws IllegalArgumentException if the cluster offers fewer than W slots, before anything is submitted
     * @throws org.apache.spark.SparkException (unchecked through Spark) with a task's error if the stage fails
     */
    public Result fit(JavaSparkContext sc, BatchSource data) {
        TaskResult[] results = runBarrier(sc, strategy, timeout,
                new TrainingTask.NetworkWork(configuration, graph, steps, data));
        byte[] bytes = results[0].model();
        try {
            if (modelPath != null) {
                Path tmp = Files.createTempFile(modelPath.toAbsolutePath().getParent(), "model", ".zip.part");
                Files.write(tmp, bytes);
                Files.move(tmp, modelPath, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            }
            Model model = graph ? ModelSerializer.restoreComputationGraph(new ByteArrayInputStream(bytes), true)
                    : ModelSerializer.restoreMultiLayerNetwork(new ByteArrayInputStream(bytes), true);
            return new Result(results[0].losses(), model);
        } catch (IOException e) {
            throw new UncheckedIOException("SparkSequenceParallel: the trained model could not be "
                    + (modelPath == null ? "read back" : "written to " + modelPath), e);
        }
    }

    /**
     * Runs a barrier stage of one task per worker of {@code strategy}, each doing {@code work} once the tasks have
     * met, and returns their results by rank.
     *
     * @throws IllegalArgumentException if the cluster offers fewer slots than workers, before anything is submitted
     */
    static TaskResult[] runBarrier(JavaSparkContext sc, StrategySpec strategy, Duration timeout,
                                   TrainingTask.Work work) {
        int w = strategy.worldSize();
        int slots = sc.defaultParallelism();
        if (slots < w) {
            throw new IllegalArgumentException("SparkSequenceParallel: the barrier stage needs " + w + " task slots "
                    + "(one per worker of " + strategy + "), the cluster offers " + slots + " (defaultParallelism); "
                    + "add executors or cores, or train on fewer workers");
        }
        String token = HexFormat.of().formatHex(new SecureRandom().generateSeed(8));
        RDD<Integer> ranks = sc.parallelize(IntStream.range(0, w).boxed().toList(), w).rdd();
        TrainingTask task = new TrainingTask(strategy, timeout.toMillis(), token, work);
        // A shuffle after the barrier stage makes it a map stage, which Spark retries as a whole when a task fails
        // (a failed barrier result stage is never retried: some of its results may have been taken already).
        Object collected = ranks.barrier().mapPartitions(task, false, ClassTag$.MODULE$.apply(TaskResult.class))
                .coalesce(1, true, scala.Option.empty(), null).collect();
        TaskResult[] results = (TaskResult[]) collected;
        Arrays.sort(results, Comparator.comparingInt(TaskResult::rank));
        return results;
    }

    /** Settings of a run. */
    public static final class Builder {
        private final String configuration;
        private final boolean graph;
        private final ParallelStrategy strategy;
        private int steps = 100;
        private Duration timeout = Duration.ofSeconds(60);
        private Path modelPath;

        private Builder(String configuration, boolean graph, ParallelStrategy strategy) {
            if (strategy == null) {
                throw new IllegalArgumentException("SparkSequenceParallel: strategy is null");
            }
            this.configuration = configuration;
            this.graph = graph;
            this.strategy = strategy;
        }

        /** Optimisation steps (default 100). */
        public Builder steps(int steps) {
            if (steps < 1) {
                throw new IllegalArgumentException("SparkSequenceParallel: steps must be >= 1, got " + steps);
            }
            this.steps = steps;
            return this;
        }

        /** How long a worker waits for another before failing, naming it (default 60 s). */
        public Builder timeout(Duration timeout) {
            if (timeout == null || timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("SparkSequenceParallel: timeout must be positive, got " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /** Also writes the trained model (ModelSerializer zip, with updater state) here, atomically. */
        public Builder modelPath(Path path) {
            this.modelPath = path;
            return this;
        }

        /** The run. */
        public SparkSequenceParallel build() {
            return new SparkSequenceParallel(this);
        }
    }

    /** A task's answer: its rank, its losses, and (rank 0) the trained model's bytes. */
    record TaskResult(int rank, double[] losses, byte[] model) implements Serializable {
    }

    /** What travels to the executors of a {@link ParallelStrategy}, which is rebuilt there. */
    record StrategySpec(String algorithm, int sequenceParallel, int dataParallel, String layout,
                        Map<String, Double> options, String zero) implements Serializable {

        static StrategySpec of(ParallelStrategy s) {
            return new StrategySpec(s.algorithm().name(), s.sequenceParallel(), s.dataParallel(),
                    s.layout() == null ? null : s.layout().name(), new HashMap<>(s.options()),
                    s.zero().name());
        }

        ParallelStrategy strategy() {
            ParallelStrategy s = ParallelStrategy.sequence(algorithm, sequenceParallel).withDataParallel(dataParallel)
                    .withZero(ZeroStage.valueOf(zero));
            if (layout != null) {
                s = s.withLayout(SequenceLayout.valueOf(layout));
            }
            for (Map.Entry<String, Double> o : options.entrySet()) {
                s = s.withOption(o.getKey(), o.getValue());
            }
            return s;
        }

        int worldSize() {
            return sequenceParallel * dataParallel;
        }

        @Override
        public String toString() {
            return algorithm + " over " + sequenceParallel + " x " + dataParallel + " workers, ZeRO " + zero;
        }
    }

}
