package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.KeyValueCaches;
import org.attn4j.layers.LayerNormLayer;
import org.attn4j.layers.LinearAttentionLayer;
import org.attn4j.layers.PositionalEmbeddingLayer;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.graph.GraphVertex;
import org.deeplearning4j.nn.conf.graph.LayerVertex;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * Incremental decoding through DL4J's {@code rnnTimeStep}: a prompt in one call, then one token per call, gives at
 * every position the output of the full-sequence forward pass (float64, 1e-10 relative), for flash attention (full
 * and windowed) and linear attention, in a ComputationGraph ({@link GptGraph}) and a MultiLayerNetwork.
 */
class IncrementalDecodingTest {

    private static final int VOCAB = 17;
    private static final int N = 40;
    private static final int PROMPT = 13;

    static INDArray tokens(long seed, int b, int n) {
        Random r = new Random(seed);
        INDArray t = Nd4j.zeros(DataType.DOUBLE, b, 1, n);
        for (int i = 0; i < b; i++) {
            for (int s = 0; s < n; s++) {
                t.putScalar(new int[] {i, 0, s}, r.nextInt(VOCAB));
            }
        }
        return t;
    }

    static INDArray steps(INDArray tokens, int from, int to) {
        return tokens.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, to)).dup();
    }

    /** The largest difference between the stepped outputs and the full pass, relative to the full pass's size. */
    static void assertSame(String what, INDArray full, INDArray[] parts) {
        INDArray stepped = Nd4j.concat(2, parts);
        double err = stepped.sub(full).amaxNumber().doubleValue() / full.amaxNumber().doubleValue();
        assertTrue(err <= 1e-10, what + ": stepped output differs from the full pass by " + err);
    }

    @Test
    void aComputationGraphDecodedStepByStepEqualsItsFullPass() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        for (int window : new int[] {0, 6, -1}) {                           // flash, windowed flash; -1: linear
            GptGraph.Attention kind = window < 0 ? GptGraph.Attention.LINEAR : GptGraph.Attention.FLASH;
            ComputationGraphConfiguration conf = new GptGraph(VOCAB, 64, 16, 4, 2, 2, kind, DataType.DOUBLE, 1e-3, 5)
                    .configuration();
            for (GraphVertex v : conf.getVertices().values()) {
                if (v instanceof LayerVertex l && l.getLayerConf().getLayer() instanceof FlashAttentionLayer f) {
                    f.setSlidingWindow(window);
                }
            }
            ComputationGraph net = new ComputationGraph(conf);
            net.init();
            INDArray x = tokens(9, 2, N);
            INDArray full = net.outputSingle(x);
            for (int round = 0; round < 2; round++) {                    // the second after clearing the state
                net.rnnClearPreviousState();
                INDArray[] parts = new INDArray[N - PROMPT + 1];
                parts[0] = net.rnnTimeStep(steps(x, 0, PROMPT))[0];
                for (int t = PROMPT; t < N; t++) {
                    parts[t - PROMPT + 1] = net.rnnTimeStep(steps(x, t, t + 1))[0];
                }
                assertSame("graph " + kind + " window " + window + " round " + round, full, parts);
            }
        }
    }

    static MultiLayerNetwork mln(Layer attention) {
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().seed(3).dataType(DataType.DOUBLE)
                .weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(16).outputDataFormat(RNNFormat.NCW).build())
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(64).width(16).build())
                .layer(attention)
                .layer(new LayerNormLayer.Builder().nIn(16).nOut(16).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(16).nOut(VOCAB).dataFormat(RNNFormat.NCW).build())
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        return net;
    }

    @Test
    void aMultiLayerNetworkDecodedStepByStepEqualsItsFullPass() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        Layer[] attention = {
            new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(4).nKvHeads(1).causal(true).build(),
            new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(4).nKvHeads(2).causal(true).slidingWindow(7)
                    .build(),
            new LinearAttentionLayer.Builder().nIn(16).nOut(16).nHeads(2).causal(true).decay(0.9).build()};
        for (Layer a : attention) {
            MultiLayerNetwork net = mln(a);
            INDArray x = tokens(4, 3, N);
            INDArray full = net.output(x);
            INDArray[] parts = new INDArray[N - PROMPT + 1];
            parts[0] = net.rnnTimeStep(steps(x, 0, PROMPT));
            for (int t = PROMPT; t < N; t++) {
                parts[t - PROMPT + 1] = net.rnnTimeStep(steps(x, t, t + 1));
            }
            assertSame("network with " + a.getClass().getSimpleName() + " " + a, full, parts);
        }
    }

    /**
     * Steps of several tokens after the prompt, a state taken with {@code rnnGetPreviousState} and continued twice
     * (the second continuation from the same state), and a reserved cache: all equal the full pass.
     */
    @Test
    void unevenStepsAndARestoredStateEqualTheFullPass() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        Layer[] attention = {
            new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(4).nKvHeads(2).causal(true).build(),
            new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(4).nKvHeads(1).causal(true).slidingWindow(5)
                    .build(),
            new LinearAttentionLayer.Builder().nIn(16).nOut(16).nHeads(2).causal(true).decay(0.9).build()};
        int[] cuts = {0, 3, 4, 9, 10, 17, 18, 19, 27, 31, N};
        int restoreAt = 5;                                               // cut index after which the state is taken
        for (Layer a : attention) {
            MultiLayerNetwork net = mln(a);
            INDArray x = tokens(11, 2, N);
            INDArray full = net.output(x);
            for (int reserve : new int[] {0, N}) {
                net.rnnClearPreviousState();
                KeyValueCaches.reserve(net, reserve);
                INDArray[] parts = new INDArray[cuts.length - 1];
                List<Map<String, INDArray>> taken = new ArrayList<>();
                for (int i = 0; i + 1 < cuts.length; i++) {
                    parts[i] = net.rnnTimeStep(steps(x, cuts[i], cuts[i + 1]));
                    for (int l = 1; i == restoreAt && l <= 2; l++) {      // positions, attention
                        taken.add(net.rnnGetPreviousState(l));
                    }
                }
                assertSame(a + " reserve " + reserve, full, parts);
                net.rnnSetPreviousState(1, taken.get(0));
                net.rnnSetPreviousState(2, taken.get(1));
                for (int i = restoreAt + 1; i + 1 < cuts.length; i++) {
                    parts[i] = net.rnnTimeStep(steps(x, cuts[i], cuts[i + 1]));
                }
                assertSame(a + " reserve " + reserve + ", continued from a taken state", full, parts);
            }
        }
    }

    /** A reserved cache is allocated once at that size; without a reservation it doubles when full. */
    @Test
    void aReservedCacheHoldsWhatWasReserved() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        MultiLayerNetwork net = mln(new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(4).nKvHeads(2)
                .causal(true).build());
        long perStep = KeyValueCaches.bytesPerStep((FlashAttentionLayer) net.getLayer(2).conf().getLayer(), 8);
        assertEquals(2 * 2 * 4 * 8 + 4, perStep);                          // K, V, position
        INDArray x = tokens(2, 1, N);
        KeyValueCaches.reserve(net, 33);
        net.rnnTimeStep(steps(x, 0, 10));
        assertEquals(33 * perStep, KeyValueCaches.bytes(net));
        net.rnnTimeStep(steps(x, 10, 33));
        assertEquals(33 * perStep, KeyValueCaches.bytes(net));
        net.rnnTimeStep(steps(x, 33, 34));                                // full: doubles what it needs
        assertEquals(68 * perStep, KeyValueCaches.bytes(net));
        net.rnnClearPreviousState();
        assertEquals(0, KeyValueCaches.bytes(net));
    }

    /**
     * A sliding window's cache keeps the keys its queries see: whatever was reserved, it never holds more than
     * 2W + n steps (n the largest call), and the keys it keeps are the last W or more.
     */
    @Test
    void aWindowsCacheStaysBoundedWhateverWasReserved() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        int window = 7;
        MultiLayerNetwork net = mln(new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(4).nKvHeads(2)
                .causal(true).slidingWindow(window).build());
        long perStep = KeyValueCaches.bytesPerStep((FlashAttentionLayer) net.getLayer(2).conf().getLayer(), 8);
        INDArray x = tokens(3, 1, N);
        KeyValueCaches.reserve(net, 1000);
        net.rnnTimeStep(steps(x, 0, 5));
        long most = 0;
        for (int t = 5; t < N; t++) {
            net.rnnTimeStep(steps(x, t, t + 1));
            most = Math.max(most, KeyValueCaches.bytes(net));
        }
        assertTrue(most <= (2L * window + 5) * perStep, "a window of " + window + " held "
                + most / perStep + " steps");
        assertTrue(most >= window * perStep, "held " + most / perStep + " steps");
    }
}
