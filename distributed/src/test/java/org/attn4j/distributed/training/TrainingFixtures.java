package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.LinearAttentionLayer;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.DenseLayer;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.conf.layers.recurrent.TimeDistributed;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * A small GPT-like network, seeded next-token batches, running a body on W in-JVM workers, and the check that a
 * run learned.
 */
public final class TrainingFixtures {

    static final int VOCAB = 11;
    /**
     * How much lower than the untrained network's a trained run's loss on its last batch must be: far above rounding
     * (float32 runs of these networks agree with float64 ones to about 1e-7 relative) and below what the least
     * effective of these runs achieves: 0.77 % (Ulysses in {@link DistributedTrainerParityTest}; its six strategies
     * at five seeds each lower the loss by 0.77 to 43 %).
     */
    static final double LEARNED_BY = 0.005;
    static final int WIDTH = 16;
    public static final int HEADS = 4;

    private TrainingFixtures() {
    }

    /**
     * Token embedding, then two blocks of [attention (causal softmax with {@code kvHeads} K/V heads, or linear
     * with decay), a position-wise tanh layer], then a softmax over the vocabulary with cross-entropy: the next
     * token at every position.
     */
    static MultiLayerNetwork gpt(DataType type, boolean linear, int kvHeads, long seed) {
        NeuralNetConfiguration.ListBuilder list = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(type).updater(new Adam(1e-2)).weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(WIDTH)
                        .outputDataFormat(RNNFormat.NCW).build());
        for (int block = 0; block < 2; block++) {
            list.layer(attention(linear, kvHeads)).layer(new TimeDistributed(new DenseLayer.Builder().nIn(WIDTH)
                    .nOut(WIDTH).activation(Activation.TANH).build(), RNNFormat.NCW));
        }
        MultiLayerConfiguration conf = list.layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(WIDTH).nOut(VOCAB).dataFormat(RNNFormat.NCW).build())
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        return net;
    }

    private static Layer attention(boolean linear, int kvHeads) {
        if (linear) {
            return new LinearAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(HEADS).causal(true)
                    .decay(0.9).build();
        }
        return new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(HEADS).nKvHeads(kvHeads)
                .causal(true).build();
    }

    /** {@code steps} batches of {@code b} token sequences of length {@code n}, labels the next token. */
    public static List<DataSet> batches(DataType type, int steps, int b, int n, long seed) {
        Random rnd = new Random(seed);
        List<DataSet> out = new ArrayList<>();
        for (int s = 0; s < steps; s++) {
            INDArray tokens = Nd4j.zeros(type, b, 1, n);
            INDArray labels = Nd4j.zeros(type, b, VOCAB, n);
            for (int i = 0; i < b; i++) {
                int t0 = rnd.nextInt(VOCAB);
                int stride = 1 + rnd.nextInt(3);
                for (int t = 0; t < n; t++) {
                    int token = (t0 + stride * t + (rnd.nextInt(10) == 0 ? 1 : 0)) % VOCAB;
                    tokens.putScalar(new int[] {i, 0, t}, token);
                    labels.putScalar(new int[] {i, (t0 + stride * (t + 1)) % VOCAB, t}, 1.0);
                }
            }
            out.add(new DataSet(tokens, labels));
        }
        return out;
    }

    /**
     * Asserts that a run learned: the loss it reported for its last batch is lower than the untrained network's
     * loss on that same batch by at least the fraction {@link #LEARNED_BY}. (A curve's first and last entries are
     * losses on different batches, so their order says nothing about learning.)
     *
     * @param curve the losses {@code fit} reported, one per batch
     * @param untrainedOnLast the untrained network's loss on the last batch
     * @param what names the run in the failure message
     */
    static void assertLearned(double[] curve, double untrainedOnLast, String what) {
        double last = curve[curve.length - 1];
        assertTrue(last < (1 - LEARNED_BY) * untrainedOnLast, what + ": the run did not learn: last batch's loss "
                + last + ", untrained " + untrainedOnLast + " (less than " + LEARNED_BY * 100 + " % lower)\n  "
                + Arrays.toString(curve));
    }

    /** Runs {@code body} on W in-JVM workers at once ({@link Ranks}; 30 s transport timeout, 300 s in all); by rank. */
    static <R> List<R> onWorkers(int w, Ranks.Body<R> body) throws Exception {
        return Ranks.runInJvm(w, Duration.ofSeconds(30), Duration.ofSeconds(300), body);
    }
}
