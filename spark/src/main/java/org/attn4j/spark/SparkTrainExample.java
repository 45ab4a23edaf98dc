package org.attn4j.spark;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Random;

import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.samples.train.GptGraph;
import org.attn4j.samples.train.TrainingTask;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The GPT-like model of {@code attn4j train} (passkey retrieval) trained through Spark: one barrier stage of
 * {@code --workers} tasks, sequence-parallel with {@code --strategy}. With no master set (spark-submit sets one) it
 * runs in local mode with one slot per worker. Arguments, each optional: {@code --workers 4 --strategy ring
 * --zero 0 --steps 200 --seq-len 128 --batch 16 --out spark-model.zip}; docs/spark.md shows the commands.
 */
public final class SparkTrainExample {

    private SparkTrainExample() {
    }

    /** Each group's examples of a step: passkey sequences drawn from a seed of (step, group). */
    record PasskeyBatches(int batch, int length) implements SparkSequenceParallel.BatchSource {
        @Override
        public DataSet batch(int step, int group, int groups) {
            Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
            return TrainingTask.passkey(3).batch(new Random(1_000_003L * step + group), batch / groups, length,
                    DataType.FLOAT);
        }
    }

    /**
     * Entry point.
     *
     * @param args {@code --name value} pairs, see the class comment
     */
    public static void main(String[] args) {
        int workers = intArg(args, "--workers", 4);
        String strategy = arg(args, "--strategy", "ring");
        int zero = intArg(args, "--zero", 0);
        int steps = intArg(args, "--steps", 200);
        int seqLen = intArg(args, "--seq-len", 128);
        int batch = intArg(args, "--batch", 16);
        Path out = Path.of(arg(args, "--out", "spark-model.zip")).toAbsolutePath();
        SparkConf conf = new SparkConf().setAppName("attn4j passkey, " + strategy + " x " + workers);
        if (!conf.contains("spark.master")) {
            conf.setMaster("local[" + workers + "]").set("spark.ui.enabled", "false");
        }
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        GptGraph model = new GptGraph(TrainingTask.passkey(3).vocab(), seqLen, 64, 4, 4, 2, GptGraph.Attention.FLASH,
                DataType.FLOAT, 3e-3, 1);
        ParallelStrategy parallel = ParallelStrategy.sequence(strategy, workers).withZero(ZeroStage.of(zero));
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            long t0 = System.nanoTime();
            SparkSequenceParallel.Result r = SparkSequenceParallel.builder(model.configuration(), parallel)
                    .steps(steps).timeout(Duration.ofSeconds(60)).modelPath(out).build()
                    .fit(sc, new PasskeyBatches(batch, seqLen));
            double seconds = (System.nanoTime() - t0) / 1e9;
            for (int i = 0; i < r.losses().length; i += Math.max(1, r.losses().length / 20)) {
                System.out.printf(Locale.ROOT, "step %d score %.4f%n", i, r.losses()[i]);   // DL4J's, per example
            }
            System.out.printf(Locale.ROOT, "done: %d steps on %d Spark tasks (%s), score %.4f -> %.4f, %.0f tokens/s, "
                    + "%.1f s; wrote %s%n", steps, workers, parallel, r.losses()[0], r.losses()[steps - 1],
                    (double) steps * batch * seqLen / seconds, seconds, out);
        } catch (RuntimeException e) {
            System.err.println("attn4j spark example: " + String.valueOf(e.getMessage()).lines().findFirst().orElse(""));
            System.exit(1);
        }
        // Spark's barrier tasks leave a non-daemon timer thread behind in local mode: end the JVM here.
        System.exit(0);
    }

    private static String arg(String[] args, String name, String fallback) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) {
                return args[i + 1];
            }
        }
        return fallback;
    }

    private static int intArg(String[] args, String name, int fallback) {
        String v = arg(args, name, null);
        try {
            return v == null ? fallback : Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " expects a whole number, got '" + v + "'");
        }
    }
}
