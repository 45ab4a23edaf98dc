package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;

import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/** Float32 Adam training on a toy sequence task that needs the state carried over earlier steps. */
class LinearAttentionLayerTrainingTest {

    private static final int VOCAB = 4;
    private static final int BATCH = 16;
    private static final int N = 12;
    private static final int ITERATIONS = 60;

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    /**
     * One-hot tokens {@code [B, VOCAB, N]}; the label at step t is 1 iff token 0 occurs at some step
     * {@code <= t}, which a causal layer can only learn from the state it carries over earlier steps.
     */
    private static DataSet seenTokenZeroTask(Random rnd) {
        INDArray x = Nd4j.zeros(DataType.FLOAT, BATCH, VOCAB, N);
        INDArray y = Nd4j.zeros(DataType.FLOAT, BATCH, 2, N);
        for (int b = 0; b < BATCH; b++) {
            boolean seen = false;
            for (int t = 0; t < N; t++) {
                int token = rnd.nextDouble() < 0.1 ? 0 : 1 + rnd.nextInt(VOCAB - 1);
                seen |= token == 0;
                x.putScalar(new long[] {b, token, t}, 1.0);
                y.putScalar(new long[] {b, seen ? 1 : 0, t}, 1.0);
            }
        }
        return new DataSet(x, y);
    }

    @Test
    void lossFallsAndStaysFiniteWithAdamInFloat32() {
        long seed = SEED + 31;
        DataSet data = seenTokenZeroTask(new Random(seed));
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(DataType.FLOAT).updater(new Adam(1e-2)).weightInit(WeightInit.XAVIER)
                .list()
                .layer(new LinearAttentionLayer.Builder().nIn(VOCAB).nOut(8).nHeads(2).nKvHeads(1).learnDecay(true)
                        .build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(8).nOut(2).build())
                .setInputType(InputType.recurrent(VOCAB))
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();

        INDArray attentionBefore = net.getLayer(0).params().dup();
        INDArray thetaBefore = net.getParam("0_theta").dup();
        double[] losses = new double[ITERATIONS + 1];
        for (int i = 0; i < ITERATIONS; i++) {
            net.fit(data);
            losses[i] = net.score(); // before this update
        }
        losses[ITERATIONS] = net.score(data);

        String curve = "losses " + Arrays.toString(losses) + ", seed " + seed;
        assertTrue(Arrays.stream(losses).allMatch(Double::isFinite), "non-finite loss: " + curve);
        assertTrue(losses[ITERATIONS] < 0.5 * losses[0], "loss did not halve: " + curve);
        double moved = net.getLayer(0).params().sub(attentionBefore).norm2Number().doubleValue();
        assertTrue(moved > 1e-2, "attention parameters barely moved (" + moved + "), seed " + seed);
        double thetaMoved = net.getParam("0_theta").sub(thetaBefore).norm2Number().doubleValue();
        assertTrue(thetaMoved > 1e-3, "decay logits barely moved (" + thetaMoved + "), seed " + seed);
    }
}
