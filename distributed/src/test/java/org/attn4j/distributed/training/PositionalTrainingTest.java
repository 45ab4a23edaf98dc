package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.PositionalEmbeddingLayer;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * A network with a learned position embedding trains sequence-parallel exactly as in one process: token embedding,
 * {@link PositionalEmbeddingLayer} (maxLength 16), causal {@link FlashAttentionLayer}, softmax over the vocabulary;
 * 10 Adam steps on sequences of 16 tokens, float64, loss curve to 1e-6 relative. Under the zigzag and striped
 * layouts a worker's local steps are not positions {@code 0..n-1}, so the curve only matches if the layer embeds
 * each step at the global position the sequence-parallel context gives it.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class PositionalTrainingTest {

    private static final int STEPS = 10;
    private static final int BATCH = 4;
    private static final int LENGTH = 16;
    private static final int WIDTH = 16;
    private static final int HEADS = 4;

    /** Ring attention over zigzag shards at (DP 1, SP 4); ATTENTION2D over striped shards at (DP 2, SP 2). */
    static Stream<Arguments> strategies() {
        return Stream.of(
                Arguments.of(ParallelStrategy.sequence("ring", 4).withLayout(SequenceLayout.ZIGZAG),
                        SequenceLayout.ZIGZAG),
                Arguments.of(ParallelStrategy.sequence("attention2d", 2).withDataParallel(2),
                        SequenceLayout.STRIPED));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("strategies")
    void lossCurveEqualsTheSingleProcessRunUnderShuffledLayouts(ParallelStrategy strategy, SequenceLayout layout)
            throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        assertEquals(layout, strategy.effectiveLayout(true), "the layout this case is about");
        long seed = 1729 + layout.ordinal();
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, seed);
        double[] expected = singleProcess(seed, batches);

        List<double[]> curves = TrainingFixtures.onWorkers(strategy.worldSize(), t -> {
            DistributedTrainer trainer = DistributedTrainer.builder(network(seed), t).strategy(strategy).build();
            double[] curve = new double[STEPS];
            for (int i = 0; i < STEPS; i++) {
                curve[i] = trainer.fit(batches.get(i));
            }
            return curve;
        });

        assertEquals(strategy.worldSize(), curves.size());
        for (int r = 0; r < curves.size(); r++) {
            for (int i = 0; i < STEPS; i++) {
                double rel = Math.abs(curves.get(r)[i] - expected[i]) / Math.abs(expected[i]);
                assertTrue(rel <= 1e-6, strategy + " rank " + r + " step " + i + ": " + curves.get(r)[i] + " vs "
                        + expected[i] + " (relative " + rel + "), seed " + seed + "\n  distributed "
                        + Arrays.toString(curves.get(r)) + "\n  single      " + Arrays.toString(expected));
            }
        }
        TrainingFixtures.assertLearned(expected, network(seed).score(batches.get(STEPS - 1)),
                "one process, seed " + seed);
    }

    /** The scores {@code net.fit(batch)} reports, one process, whole batches. */
    private static double[] singleProcess(long seed, List<DataSet> batches) {
        MultiLayerNetwork net = network(seed);
        double[] curve = new double[batches.size()];
        for (int i = 0; i < batches.size(); i++) {
            net.fit(batches.get(i));
            curve[i] = net.score();
        }
        return curve;
    }

    /**
     * Tokens -> embedding -> + position embedding -> causal attention -> next-token softmax, all NCW. The position
     * table starts with std 0.5, as large as the token embedding, so that a step embedded at a wrong position moves
     * the loss far beyond the tolerance.
     */
    private static MultiLayerNetwork network(long seed) {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(DataType.DOUBLE).updater(new Adam(1e-2)).weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(TrainingFixtures.VOCAB).nOut(WIDTH)
                        .outputDataFormat(RNNFormat.NCW).build())
                .layer(new PositionalEmbeddingLayer.Builder().width(WIDTH).maxLength(LENGTH).initStd(0.5).build())
                .layer(new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(HEADS).causal(true).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(WIDTH).nOut(TrainingFixtures.VOCAB).dataFormat(RNNFormat.NCW).build())
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        return net;
    }
}
