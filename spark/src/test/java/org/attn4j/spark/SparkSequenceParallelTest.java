package org.attn4j.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.layers.FlashAttentionLayer;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.DenseLayer;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.conf.layers.recurrent.TimeDistributed;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * Sequence-parallel training as a Spark barrier stage in local mode: four tasks reproduce the single-process loss
 * curve, a failing task fails the stage with its error within the transport timeout and a retried attempt
 * works, and too few slots are refused before anything trains.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class SparkSequenceParallelTest {

    private static final int VOCAB = 12;
    private static final int WIDTH = 16;
    private static final int STEPS = 6;
    private static final int BATCH = 4;
    private static final int LENGTH = 16;

    @TempDir
    Path tmp;

    static MultiLayerConfiguration gpt(long seed) {
        return new NeuralNetConfiguration.Builder().seed(seed).dataType(DataType.DOUBLE).updater(new Adam(1e-2))
                .weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(WIDTH).outputDataFormat(RNNFormat.NCW)
                        .build())
                .layer(new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(4).nKvHeads(2).causal(true)
                        .build())
                .layer(new TimeDistributed(new DenseLayer.Builder().nIn(WIDTH).nOut(WIDTH).activation(Activation.TANH)
                        .build(), RNNFormat.NCW))
                .layer(new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(4).nKvHeads(2).causal(true)
                        .build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(WIDTH).nOut(VOCAB).dataFormat(RNNFormat.NCW).build())
                .build();
    }

    /** The whole batch of a step: seeded next-token sequences, the same on every executor. */
    static DataSet whole(int step) {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        Random rnd = new Random(1000L + step);
        INDArray tokens = Nd4j.zeros(DataType.DOUBLE, BATCH, 1, LENGTH);
        INDArray labels = Nd4j.zeros(DataType.DOUBLE, BATCH, VOCAB, LENGTH);
        for (int i = 0; i < BATCH; i++) {
            int t0 = rnd.nextInt(VOCAB);
            int stride = 1 + rnd.nextInt(3);
            for (int t = 0; t < LENGTH; t++) {
                tokens.putScalar(new int[] {i, 0, t}, (t0 + stride * t) % VOCAB);
                labels.putScalar(new int[] {i, (t0 + stride * (t + 1)) % VOCAB, t}, 1.0);
            }
        }
        return new DataSet(tokens, labels);
    }

    /** A group's examples of a step: its rows of the whole batch. */
    static DataSet group(int step, int group, int groups) {
        DataSet all = whole(step);
        int per = BATCH / groups;
        return new DataSet(all.getFeatures().get(NDArrayIndex.interval(group * per, (group + 1) * per)).dup(),
                all.getLabels().get(NDArrayIndex.interval(group * per, (group + 1) * per)).dup());
    }

    static double[] singleProcess(long seed) {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        MultiLayerNetwork net = new MultiLayerNetwork(gpt(seed));
        net.init();
        double[] curve = new double[STEPS];
        for (int i = 0; i < STEPS; i++) {
            net.fit(whole(i));
            curve[i] = net.score();
        }
        return curve;
    }

    static JavaSparkContext spark(String master) {
        SparkConf conf = new SparkConf().setMaster(master).setAppName("attn4j-spark-test")
                .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
                .set("spark.driver.bindAddress", "127.0.0.1");
        return new JavaSparkContext(conf);
    }

    @ParameterizedTest(name = "{0} DP={1} SP={2} {3}")
    @CsvSource({"ring, 1, 4, NONE", "ring, 2, 2, GRADIENTS", "ring, 2, 2, PARAMETERS", "attention2d, 1, 4, NONE",
        "attention2d, 1, 4, GRADIENTS"})
    void fourBarrierTasksReproduceTheSingleProcessLossCurve(String algo, int dp, int sp, ZeroStage zero) {
        long seed = 7 + algo.hashCode();
        double[] expected = singleProcess(seed);
        ParallelStrategy strategy = ParallelStrategy.sequence(algo, sp).withDataParallel(dp).withZero(zero);
        Path model = tmp.resolve("model.zip");
        SparkSequenceParallel.Result r;
        try (JavaSparkContext sc = spark("local[4]")) {
            r = SparkSequenceParallel.builder(gpt(seed), strategy).steps(STEPS).timeout(Duration.ofSeconds(20))
                    .modelPath(model).build().fit(sc, SparkSequenceParallelTest::group);
        }
        for (int i = 0; i < STEPS; i++) {
            double rel = Math.abs(r.losses()[i] - expected[i]) / Math.abs(expected[i]);
            assertTrue(rel <= 1e-6, strategy + " step " + i + ": " + Arrays.toString(r.losses()) + " vs "
                    + Arrays.toString(expected));
        }
        MultiLayerNetwork reference = new MultiLayerNetwork(gpt(seed));
        reference.init();
        // The run learns: on its last batch, at least 0.5 % below the untrained network (far above float64 rounding;
        // 2 to 4 % measured at six seeds). Its first and last losses are on different batches: their order says
        // nothing about learning.
        double untrained = reference.score(whole(STEPS - 1));
        assertTrue(expected[STEPS - 1] < 0.995 * untrained, "the run did not learn: last batch's loss "
                + expected[STEPS - 1] + ", untrained " + untrained + "; " + Arrays.toString(expected));
        for (int i = 0; i < STEPS; i++) {
            reference.fit(whole(i));
        }
        INDArray trained = ((MultiLayerNetwork) r.model()).params();
        assertEquals(0.0, trained.sub(reference.params()).amaxNumber().doubleValue(), 1e-6,
                "the returned model is the trained one");
        assertTrue(Files.isRegularFile(model));
    }

    /** Rank 2 fails at step 3 of every attempt (the user's data source throws). */
    static DataSet failingAlways(int step, int group, int groups) {
        if (TaskContext.get().partitionId() == 2 && step == 3) {
            throw new IllegalStateException("the data of rank 2 is unreadable at step 3");
        }
        return group(step, group, groups);
    }

    /** Rank 2 fails at step 3 of the first attempt only. */
    static DataSet failingOnce(int step, int group, int groups) {
        TaskContext ctx = TaskContext.get();
        if (ctx.partitionId() == 2 && step == 3 && ctx.stageAttemptNumber() == 0) {
            throw new IllegalStateException("the data of rank 2 is unreadable at step 3 of the first attempt");
        }
        return group(step, group, groups);
    }

    @Test
    void aFailingTaskFailsTheStageWithItsErrorAndARetriedAttemptWorks() {
        ParallelStrategy strategy = ParallelStrategy.sequence("ring", 4);
        SparkSequenceParallel job = SparkSequenceParallel.builder(gpt(3), strategy).steps(STEPS)
                .timeout(Duration.ofSeconds(10)).build();
        long t0 = System.nanoTime();
        try (JavaSparkContext sc = spark("local[4]")) {               // every attempt fails: so does the job
            Exception e = assertThrows(Exception.class, () -> job.fit(sc, SparkSequenceParallelTest::failingAlways));
            assertTrue(String.valueOf(e.getMessage()).contains("the data of rank 2 is unreadable at step 3"),
                    e.getMessage());
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertTrue(seconds < 120, "failed after " + seconds + " s");
        try (JavaSparkContext sc = spark("local[4]")) {               // the first attempt fails, the retry trains
            SparkSequenceParallel.Result r = job.fit(sc, SparkSequenceParallelTest::failingOnce);
            double[] expected = singleProcess(3);
            for (int i = 0; i < STEPS; i++) {
                assertEquals(expected[i], r.losses()[i], 1e-6 * Math.abs(expected[i]), "retried run, step " + i);
            }
        }
    }

    @Test
    void fewerSlotsThanTasksAreRefusedBeforeAnythingTrains() {
        try (JavaSparkContext sc = spark("local[2]")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> SparkSequenceParallel.builder(gpt(1), ParallelStrategy.sequence("ring", 4)).steps(2).build()
                            .fit(sc, SparkSequenceParallelTest::group));
            assertTrue(e.getMessage().contains("the barrier stage needs 4 task slots")
                    && e.getMessage().contains("the cluster offers 2"), e.getMessage());
        }
    }

    @Test
    void theSavedModelRestoresWithModelSerializer() throws Exception {
        Path model = tmp.resolve("m.zip");
        try (JavaSparkContext sc = spark("local[2]")) {
            SparkSequenceParallel.builder(gpt(5), ParallelStrategy.sequence("ring", 2)).steps(2).modelPath(model)
                    .build().fit(sc, SparkSequenceParallelTest::group);
        }
        MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(model.toFile(), true);
        assertEquals(2, restored.getIterationCount());
    }
}
