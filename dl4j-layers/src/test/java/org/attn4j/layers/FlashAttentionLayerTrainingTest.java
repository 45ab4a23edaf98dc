package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;

/**
 * Float32 Adam training on a toy sequence task that needs attention over earlier steps: the float32 loss curve is
 * the float64 curve of the same seeded network and data to within float32's rounding, and the float64 run ends
 * below the least loss a model reaches without looking at other steps.
 */
class FlashAttentionLayerTrainingTest {

    private static final int VOCAB = 4;
    private static final int BATCH = 32;
    private static final int N = 8;
    private static final int HEAD_SIZE = 4;
    private static final int WIDTH = 4 * HEAD_SIZE;
    /** Float32 follows float64 this far; past step 38 they part (by over 1e-5) for some of the seeds tried. */
    private static final int STEPS = 20;
    /**
     * The longest chain of reductions through one forward and backward pass (see {@link Float32Training#tolerance}):
     * projections (VOCAB), scores (HEAD_SIZE), softmax and P V (N each), the output projection and the output layer
     * (WIDTH each), the class softmax (2), the score's sum over BATCH x N steps; then the same way back, ending in
     * the weight gradients' sums over BATCH x N steps.
     */
    private static final int ROUNDINGS = 2 * (VOCAB + HEAD_SIZE + 2 * N + 2 * WIDTH + 2 + BATCH * N);

    @AfterEach
    void restoreDefaultTypes() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
    }

    @Test
    void float32AdamTrainingFollowsFloat64AndLearnsWhatNeedsEarlierSteps() {
        long seed = SEED + 3;
        DataSet data = LayerTestSupport.seenTokenZeroTask(new Random(seed), BATCH, VOCAB, N);

        double[] float64 = train(DataType.DOUBLE, data, seed);
        double[] float32 = train(DataType.FLOAT, data, seed);

        Float32Training.assertFollowsFloat64(float64, float32, ROUNDINGS, "seed " + seed);
        Float32Training.assertLearnsBeyondOwnStep(float64, data, N, "seed " + seed);
    }

    /** The loss after 0, 1, ..., STEPS fits; asserts that the attention layer's parameters moved. */
    private static double[] train(DataType type, DataSet data, long seed) {
        Nd4j.setDefaultDataTypes(type, type);
        DataSet typed = new DataSet(data.getFeatures().castTo(type), data.getLabels().castTo(type));
        FlashAttentionLayer layer = LayerTestSupport.attention(VOCAB, WIDTH, 4).nKvHeads(2).causal(true).build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, type, new Adam(1e-2), seed, 2);
        INDArray attentionBefore = net.getLayer(0).params().dup();
        double[] losses = new double[STEPS + 1];
        losses[0] = net.score(typed);
        for (int s = 1; s <= STEPS; s++) {
            net.fit(typed);
            losses[s] = net.score(typed);
        }
        double moved = net.getLayer(0).params().sub(attentionBefore).norm2Number().doubleValue();
        assertTrue(moved > 1e-2, type + ": attention parameters barely moved (" + moved + "), seed " + seed);
        return losses;
    }
}
