package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.layers.FlashAttentionLayer;
import org.deeplearning4j.nn.api.Model;
import java.nio.file.Path;

import org.attn4j.layers.TiedEmbeddingLayer;
import org.attn4j.layers.TiedEmbeddings;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.graph.ElementWiseVertex;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.io.TempDir;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.deeplearning4j.optimize.api.BaseTrainingListener;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * The trainer beyond the float64 matrix: float32 curves to 1e-4, a ComputationGraph with residual connections,
 * DL4J listeners seeing the whole batch's score, and refusals of what a slice cannot
 * reproduce.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class DistributedTrainerTest {

    @ParameterizedTest(name = "{0} DP={1} SP={2} {3}")
    @CsvSource({"ring, 2, 2, NONE", "ring-zigzag, 1, 4, GRADIENTS", "wallfacer, 1, 4, PARAMETERS",
        "attention2d, 2, 2, OPTIMIZER_STATE",
        "lasp, 2, 2, NONE", "ulysses, 1, 2, GRADIENTS"})
    void float32CurvesEqualTheSingleProcessRunTo1e4(String name, int dp, int sp, ZeroStage zero) throws Exception {
        DistributedTrainerParityTest.check(name, dp, sp, zero, DataType.FLOAT, 1e-4);
    }

    @Test
    void aComputationGraphWithResidualConnectionsTrainsAsInOneProcess() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, 10, 4, 16, 11);
        ComputationGraph single = graph();
        double[] expected = new double[batches.size()];
        for (int i = 0; i < batches.size(); i++) {
            single.fit(batches.get(i));
            expected[i] = single.score();
        }
        ParallelStrategy s = ParallelStrategy.sequence("ring", 2).withDataParallel(2)
                .withZero(ZeroStage.GRADIENTS);
        List<double[]> curves = TrainingFixtures.onWorkers(4, t -> {
            DistributedTrainer trainer = DistributedTrainer.builder(graph(), t).strategy(s).build();
            double[] c = new double[batches.size()];
            for (int i = 0; i < c.length; i++) {
                c[i] = trainer.fit(batches.get(i));
            }
            return c;
        });
        for (double[] c : curves) {
            for (int i = 0; i < c.length; i++) {
                assertEquals(expected[i], c[i], 1e-6 * Math.abs(expected[i]), "step " + i);
            }
        }
    }

    /**
     * The input embedding tied to the output layer (one parameter, {@link TiedEmbeddingLayer}) trains as in one
     * process under ZeRO stages 2 and 3, where that parameter is partitioned with the rest, and the sharded
     * checkpoint exports to a graph that plain DL4J restores (bound again) with the workers' outputs.
     */
    @ParameterizedTest(name = "ZeRO {0}")
    @CsvSource({"GRADIENTS", "PARAMETERS"})
    void aTiedEmbeddingTrainsAsInOneProcessUnderZeroAndExports(ZeroStage zero, @TempDir Path dir) throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, 6, 4, 16, 11);
        INDArray features = batches.get(0).getFeatures();
        ComputationGraph single = graph(true);
        assertEquals(graph(false).numParams() - (long) TrainingFixtures.VOCAB * TrainingFixtures.WIDTH,
                single.numParams(), "one parameter for both embeddings");
        double[] expected = new double[batches.size()];
        for (int i = 0; i < batches.size(); i++) {
            single.fit(batches.get(i));
            expected[i] = single.score();
        }
        Path ck = dir.resolve("ck");
        ParallelStrategy s = ParallelStrategy.sequence("ring", 2).withDataParallel(2).withZero(zero);
        List<Object[]> runs = TrainingFixtures.onWorkers(4, t -> {
            ComputationGraph g = graph(true);
            DistributedTrainer trainer = DistributedTrainer.builder(g, t).strategy(s).checkpoints(ck, 3).build();
            double[] c = new double[batches.size()];
            for (int i = 0; i < c.length; i++) {
                c[i] = trainer.fit(batches.get(i));
            }
            return new Object[] {c, g.outputSingle(features)};
        });
        Path zip = dir.resolve("model.zip");
        assertEquals(6, CheckpointExport.export(ck, zip));
        ComputationGraph restored = TiedEmbeddings.bind(ModelSerializer.restoreComputationGraph(zip.toFile()));
        for (Object[] run : runs) {
            double[] c = (double[]) run[0];
            for (int i = 0; i < c.length; i++) {
                assertEquals(expected[i], c[i], 1e-6 * Math.abs(expected[i]), "step " + i);
            }
            assertEquals(run[1], restored.outputSingle(features), "the exported model's outputs");
        }
    }

    @Test
    void listenersSeeTheWholeBatchScoreAndTheIterationCount() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, 3, 4, 16, 5);
        List<List<double[]>> seen = TrainingFixtures.onWorkers(2, t -> {
            List<double[]> events = new ArrayList<>();
            DistributedTrainer trainer = DistributedTrainer.builder(TrainingFixtures.gpt(DataType.DOUBLE, false, 2,
                    3), t).strategy(ParallelStrategy.sequence("ring", 2)).listeners(
                    new BaseTrainingListener() {
                        @Override
                        public void iterationDone(Model model, int iteration, int epoch) {
                            events.add(new double[] {iteration, model.score()});
                        }
                    }).build();
            for (DataSet b : batches) {
                double score = trainer.fit(b);
                assertEquals(score, events.get(events.size() - 1)[1], 0.0);
            }
            return events;
        });
        assertEquals(3, seen.get(0).size());
        for (int i = 0; i < 3; i++) {
            assertEquals(i, (int) seen.get(0).get(i)[0]);
            assertEquals(seen.get(0).get(i)[1], seen.get(1).get(i)[1], 0.0, "both workers report the same score");
        }
    }

    @Test
    void refusesRegularizationWhichASliceCannotReproduce() throws Exception {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().l2(1e-3)
                .updater(new Adam(1e-2)).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(5).nOut(4).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(4).nOut(5).build()).build());
        net.init();
        List<String> messages = TrainingFixtures.onWorkers(1, t -> assertThrows(IllegalArgumentException.class,
                () -> DistributedTrainer.builder(net, t).strategy(ParallelStrategy.sequence(SequenceAlgorithm.byName("ring"),
                        1)).build()).getMessage());
        assertTrue(messages.get(0).contains("regularization"), messages.get(0));
    }

    /**
     * Gradient clipping by the global norm: with plain SGD, one step at ZeRO stages 0 and 3 on four workers (two
     * sequence-parallel groups of two) moves the parameters by {@code -lr g / B * maxNorm / (|g / B| + 1e-6)}, g
     * being DL4J's gradient of the whole batch in one process, and reports {@code |g / B|} as the norm.
     */
    @ParameterizedTest(name = "ZeRO {0}")
    @CsvSource({"NONE", "PARAMETERS"})
    void clippingScalesTheStepByTheGlobalNormOfOneProcesssGradient(ZeroStage zero) throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        DataSet batch = TrainingFixtures.batches(DataType.DOUBLE, 1, 4, 16, 7).get(0);
        double lr = 0.1;
        ComputationGraph single = graph(false, new org.nd4j.linalg.learning.config.Sgd(lr));
        INDArray start = single.params().dup();
        single.setInputs(batch.getFeatures());
        single.setLabels(batch.getLabels());
        single.computeGradientAndScore();
        INDArray perExample = single.gradient().gradient().dup().divi(4);
        double norm = perExample.norm2Number().doubleValue();
        double maxNorm = norm / 4;
        INDArray expected = start.sub(perExample.mul(lr * maxNorm / (norm + 1e-6)));
        ParallelStrategy s = ParallelStrategy.sequence("ring", 2).withDataParallel(2).withZero(zero);
        List<Object[]> runs = TrainingFixtures.onWorkers(4, t -> {
            ComputationGraph g = graph(false, new org.nd4j.linalg.learning.config.Sgd(lr));
            DistributedTrainer trainer = DistributedTrainer.builder(g, t).strategy(s).clipGradientNorm(maxNorm)
                    .build();
            trainer.fit(batch);
            return new Object[] {trainer.gradientNorm(), g.params().dup()};
        });
        for (Object[] r : runs) {
            assertEquals(norm, (double) r[0], 1e-10 * norm, "the gradient's global norm");
            INDArray got = (INDArray) r[1];
            double err = got.sub(expected).norm2Number().doubleValue() / expected.sub(start).norm2Number()
                    .doubleValue();
            assertTrue(err < 1e-9, "the clipped step differs from one process's by " + err + " of the step");
        }
    }

    /** in -> embedding -> attention -> (+ embedding) -> attention -> (+) -> softmax: a residual GPT-like graph. */
    private static ComputationGraph graph() {
        return graph(false);
    }

    /** {@link #graph()}, with the embedding tied to the output layer's weights when {@code tied}. */
    private static ComputationGraph graph(boolean tied) {
        return graph(tied, new Adam(1e-2));
    }

    /** {@link #graph(boolean)} with {@code updater}. */
    private static ComputationGraph graph(boolean tied, org.nd4j.linalg.learning.config.IUpdater updater) {
        int w = TrainingFixtures.WIDTH;
        ComputationGraphConfiguration conf = new NeuralNetConfiguration.Builder().seed(5).dataType(DataType.DOUBLE)
                .updater(updater).weightInit(WeightInit.XAVIER).graphBuilder()
                .addInputs("in")
                .addLayer("embed", tied ? new TiedEmbeddingLayer.Builder().width(w).head("out").build()
                        : new EmbeddingSequenceLayer.Builder().nIn(TrainingFixtures.VOCAB).nOut(w)
                        .outputDataFormat(RNNFormat.NCW).build(), "in")
                .addLayer("attn1", new FlashAttentionLayer.Builder().nIn(w).nOut(w).nHeads(4).nKvHeads(2)
                        .causal(true).build(), "embed")
                .addVertex("res1", new ElementWiseVertex(ElementWiseVertex.Op.Add), "embed", "attn1")
                .addLayer("attn2", new FlashAttentionLayer.Builder().nIn(w).nOut(w).nHeads(4).causal(true)
                        .activation(Activation.TANH).build(), "res1")
                .addVertex("res2", new ElementWiseVertex(ElementWiseVertex.Op.Add), "res1", "attn2")
                .addLayer("out", new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(w).nOut(TrainingFixtures.VOCAB).dataFormat(RNNFormat.NCW)
                        .build(), "res2")
                .setOutputs("out").build();
        ComputationGraph g = new ComputationGraph(conf);
        g.init();
        return TiedEmbeddings.bind(g);
    }
}
