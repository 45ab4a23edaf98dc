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

/** Float32 Adam training on a toy sequence task that needs attention over earlier steps. */
class FlashAttentionLayerTrainingTest {

    private static final int VOCAB = 4;
    private static final int BATCH = 32;
    private static final int N = 8;
    private static final int ITERATIONS = 60;

    @BeforeEach
    void singlePrecision() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @Test
    void lossFallsAndStaysFiniteWithAdamInFloat32() {
        long seed = SEED + 3;
        DataSet data = LayerTestSupport.seenTokenZeroTask(new Random(seed), BATCH, VOCAB, N);
        FlashAttentionLayer layer = LayerTestSupport.attention(VOCAB, 16, 4).nKvHeads(2).causal(true).build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.FLOAT, new Adam(1e-2), seed, 2);

        INDArray attentionBefore = net.getLayer(0).params().dup();
        double[] losses = new double[ITERATIONS + 1];
        losses[0] = net.score(data);
        for (int i = 1; i <= ITERATIONS; i++) {
            net.fit(data);
            losses[i] = net.score(data);
        }

        String curve = "losses " + Arrays.toString(losses) + ", seed " + seed;
        assertTrue(Arrays.stream(losses).allMatch(Double::isFinite), "non-finite loss: " + curve);
        assertTrue(losses[ITERATIONS] < 0.5 * losses[0], "loss did not halve: " + curve);
        double moved = net.getLayer(0).params().sub(attentionBefore).norm2Number().doubleValue();
        assertTrue(moved > 1e-2, "attention parameters barely moved (" + moved + "), seed " + seed);
    }
}
