package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.attn4j.layers.LayerTestSupport.assertFailsWith;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * Defaults, parameter layout and initial values, and bad settings failing early with a message naming the
 * layer, the expected and the actual value; the settings every attention layer shares are checked by
 * {@link AttentionLayerConfigContract}.
 */
class LinearAttentionLayerConfigTest extends AttentionLayerConfigContract {

    @Override
    LinearAttentionLayer.Builder builder() {
        return new LinearAttentionLayer.Builder();
    }

    @Override
    String type() {
        return "LinearAttentionLayer";
    }

    @Override
    long paramsOfFourInEightOutTwoHeads() {
        return 4 * 8 * 3 + 8 * 3 + 8 + 8 * 8 + 8;
    }

    @Test
    void defaultsToCausalTransNormerSlopesAndTheOpsChunk() {
        LinearAttentionLayer layer = LayerTestSupport.linear(4, 12, 3).build();
        assertEquals(3, layer.getNKvHeads());
        assertEquals(4, layer.effectiveHeadSize());
        assertTrue(layer.isCausal());
        assertNull(layer.getDecay());
        assertFalse(layer.isLearnDecay());
        assertEquals(Decay.transNormerSlopes(3), layer.configuredDecay());
        assertEquals(LinearAttention.DEFAULT_CHUNK, layer.effectiveChunkSize());
        assertEquals(RNNFormat.NCW, layer.dataFormat());
        assertEquals(new ActivationIdentity(), layer.getActivationFn());
    }

    @Test
    void usesNoDecayWhenNotCausal() {
        assertEquals(Decay.none(), LayerTestSupport.linear(4, 8, 2).causal(false).build().configuredDecay());
    }

    @Test
    void initialisesGainToOneAndDecayLogitsToTheSlopes() {
        LinearAttentionLayer layer = LayerTestSupport.linear(4, 8, 4).nKvHeads(2).learnDecay(true).build();
        MultiLayerNetwork net = LayerTestSupport.mln(layer, DataType.DOUBLE, new NoOp(), SEED);
        LinearAttentionParamInitializer init = LinearAttentionParamInitializer.getInstance();

        assertEquals(List.of("Wq", "bq", "Wk", "bk", "Wv", "bv", "g", "Wo", "bo", "theta"), init.paramKeys(layer));
        long expected = 4 * 8 + 8 + 2 * (4 * 4 + 4) + 8 + 8 * 8 + 8 + 4;
        assertEquals(expected, init.numParams(layer));
        assertEquals(expected, net.getLayer(0).numParams());
        assertArrayEquals(new double[] {1, 1, 1, 1, 1, 1, 1, 1}, net.getParam("0_g").toDoubleVector(), 0.0);
        double[] theta = net.getParam("0_theta").toDoubleVector();
        double[] slopes = Decay.transNormerSlopes(4).values();
        for (int h = 0; h < 4; h++) {
            assertEquals(slopes[h], 1 / (1 + Math.exp(-theta[h])), 1e-12, "lambda of head " + h);
        }
    }

    @Test
    void initialisesDecayLogitsFromConfiguredValuesAndHasNoThetaWhenFixed() {
        MultiLayerNetwork learned = LayerTestSupport.mln(LayerTestSupport.linear(4, 8, 2).decay(0.9).learnDecay(true)
                .build(), DataType.DOUBLE, new NoOp(), SEED);
        double logit = Math.log(0.9 / 0.1);
        assertArrayEquals(new double[] {logit, logit}, learned.getParam("0_theta").toDoubleVector(), 1e-12);

        LinearAttentionLayer fixed = LayerTestSupport.linear(4, 8, 2).decay(0.9).build();
        assertFalse(LinearAttentionParamInitializer.getInstance().paramKeys(fixed).contains("theta"));
    }

    @Test
    void rejectsDecayWhenNotCausal() {
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.linear(4, 8, 2).causal(false).decay(0.9).build(),
                "LinearAttentionLayer", "decay [0.9] needs causal attention", "no decay (lambda = 1)");
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.linear(4, 8, 2).causal(false).learnDecay(true).build(),
                "LinearAttentionLayer", "learnDecay needs causal attention");
    }

    @Test
    void rejectsDecayWithWrongCount() {
        Throwable e = assertThrows(IllegalArgumentException.class,
                () -> LayerTestSupport.linear(4, 12, 3).decay(0.9, 0.8).build());
        assertEquals("LinearAttentionLayer: decay must have 1 or nHeads (3) values, got 2", e.getMessage());
    }

    @Test
    void rejectsDecayOutsideZeroToOne() {
        for (double lambda : new double[] {0.0, -0.5, 1.5, Double.NaN}) {
            assertFailsWith(IllegalArgumentException.class,
                    () -> LayerTestSupport.linear(4, 8, 2).decay(0.9, lambda).build(),
                    "LinearAttentionLayer", "decay values must be in (0, 1]", "got " + lambda + " at index 1");
        }
    }

    @Test
    void rejectsLearnedDecayStartingAtOne() {
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.linear(4, 8, 2).decay(1.0).learnDecay(true).build(),
                "LinearAttentionLayer", "decay values must be < 1", "got 1.0 at index 0");
    }

    @Test
    void rejectsNegativeChunkSize() {
        assertFailsWith(IllegalArgumentException.class, () -> LayerTestSupport.linear(4, 8, 2).chunkSize(-1).build(),
                "LinearAttentionLayer", "chunkSize must be >= 1", "got -1");
    }

    @Test
    void namesTheLayerInMessages() {
        assertFailsWith(IllegalArgumentException.class,
                () -> LayerTestSupport.linear(4, 8, 2).decay(0.9, 0.8, 0.7).name("lin1").build(),
                "LinearAttentionLayer \"lin1\"", "nHeads (2)", "got 3");
    }
}
