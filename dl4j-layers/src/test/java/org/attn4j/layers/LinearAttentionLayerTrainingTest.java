package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;

import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

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

    @Test
    void lossFallsAndStaysFiniteWithAdamInFloat32() {
        long seed = SEED + 31;
        DataSet data = LayerTestSupport.seenTokenZeroTask(new Random(seed), BATCH, VOCAB, N);
        LinearAttentionLayer layer = LayerTestSupport.linear(VOCAB, 8, 2).nKvHeads(1).learnDecay(true).build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.FLOAT, new Adam(1e-2), seed, 2);

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
