package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.attn4j.layers.LinearAttentionLayer;
import org.attn4j.layers.PositionalEmbeddingLayer;
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
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * A prompt prefilled over a sequence group with each softmax algorithm, then decoded with the workers' partial
 * attention merged, gives on every worker the outputs of single-device decoding (float64, 1e-10 relative).
 */
class DistributedDecoderTest {

    private static final int VOCAB = 13;
    private static final int WIDTH = 16;

    static MultiLayerNetwork net(int kvHeads, int window, long seed) {
        return net(kvHeads, window, seed, false);
    }

    /**
     * Embedding, learned positions or (with {@code rope}) rotary ones in the attention layers (rotate-half, then
     * interleaved with dynamic scaling from the steps seen), two blocks, softmax.
     */
    static MultiLayerNetwork net(int kvHeads, int window, long seed, boolean rope) {
        NeuralNetConfiguration.ListBuilder list = new NeuralNetConfiguration.Builder().seed(seed)
                .dataType(DataType.DOUBLE).weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(WIDTH).outputDataFormat(RNNFormat.NCW)
                        .build());
        if (!rope) {
            list.layer(new PositionalEmbeddingLayer.Builder().maxLength(128).width(WIDTH).build());
        }
        RotaryEmbedding[] rotary = {RotaryEmbedding.of(30), RotaryEmbedding.builder().theta(60)
                .layout(RotaryEmbedding.Layout.INTERLEAVED).scaling(RotaryEmbedding.Scaling.DYNAMIC, 2)
                .maxPositions(20).build()};
        for (int block = 0; block < 2; block++) {
            list.layer(new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(4).nKvHeads(kvHeads)
                    .causal(true).slidingWindow(window).rope(rope ? rotary[block] : null).build())
                    .layer(new TimeDistributed(new DenseLayer.Builder().nIn(WIDTH).nOut(WIDTH)
                            .activation(Activation.TANH).build(), RNNFormat.NCW));
        }
        MultiLayerConfiguration conf = list.layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                .activation(Activation.SOFTMAX).nIn(WIDTH).nOut(VOCAB).dataFormat(RNNFormat.NCW).build()).build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        return net;
    }

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

    static INDArray steps(INDArray a, int from, int to) {
        return a.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, to)).dup();
    }

    /** Outputs after the prompt of {@code prompt} steps, then after each decoding call (cuts of the rest). */
    static final int[] CUTS = {1, 1, 3, 1, 2, 1};

    /** The single-device outputs: the prompt's last step, then each call's steps. */
    static List<INDArray> reference(MultiLayerNetwork net, INDArray x, int prompt) {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        net.rnnClearPreviousState();
        List<INDArray> out = new ArrayList<>();
        INDArray first = net.rnnTimeStep(steps(x, 0, prompt));
        out.add(steps(first, prompt - 1, prompt));
        int at = prompt;
        for (int cut : CUTS) {
            out.add(net.rnnTimeStep(steps(x, at, at + cut)));
            at += cut;
        }
        return out;
    }

    static void decodesLikeOneDevice(ParallelStrategy strategy, int kvHeads, int window, int prompt)
            throws Exception {
        decodesLikeOneDevice(strategy, kvHeads, window, prompt, false);
    }

    static void decodesLikeOneDevice(ParallelStrategy strategy, int kvHeads, int window, int prompt, boolean rope)
            throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        MultiLayerNetwork net = net(kvHeads, window, 7, rope);
        INDArray x = tokens(prompt, 2, prompt + java.util.Arrays.stream(CUTS).sum());
        List<INDArray> expected = reference(net.clone(), x, prompt);
        List<MultiLayerNetwork> copies = new ArrayList<>();
        for (int r = 0; r < strategy.worldSize(); r++) {
            copies.add(net.clone());
        }
        List<List<INDArray>> got = TrainingFixtures.onWorkers(strategy.worldSize(), t -> {
            Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
            DistributedDecoder decoder = DistributedDecoder.of(copies.get(t.rank()), t, strategy);
            List<INDArray> out = new ArrayList<>();
            for (int round = 0; round < 2; round++) {                    // the second prefill starts afresh
                out.clear();
                out.add(decoder.prefill(steps(x, 0, prompt)));
                int at = prompt;
                for (int cut : CUTS) {
                    out.add(decoder.step(steps(x, at, at + cut)));
                    at += cut;
                }
            }
            return out;
        });
        for (int r = 0; r < got.size(); r++) {
            for (int i = 0; i < expected.size(); i++) {
                INDArray e = expected.get(i);
                double err = got.get(r).get(i).sub(e).amaxNumber().doubleValue() / e.amaxNumber().doubleValue();
                assertTrue(err <= 1e-10, strategy + ", window " + window + ", prompt " + prompt + ": worker " + r
                        + ", output " + i + " differs from one device by " + err);
            }
        }
    }

    @Test
    void everySoftmaxAlgorithmPrefillsAndDecodesLikeOneDevice() throws Exception {
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 2), 2, 0, 24);
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 3), 1, 0, 37);          // 36 sharded, 1 decoded
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 2).withLayout(SequenceLayout.ZIGZAG), 2, 0, 26);
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 4), 2, 9, 40);           // a window
        decodesLikeOneDevice(ParallelStrategy.sequence("attention2d", 4), 2, 0, 32);
        decodesLikeOneDevice(ParallelStrategy.sequence("wallfacer", 4), 2, 0, 32);
        decodesLikeOneDevice(ParallelStrategy.sequence("ulysses", 2), 2, 0, 30);
        decodesLikeOneDevice(ParallelStrategy.sequence("allgather", 3), 2, 0, 33);
        decodesLikeOneDevice(new ParallelStrategy(1, 3, SequenceAlgorithm.byName("ring"), null,
                java.util.Map.of(), ZeroStage.NONE), 4, 0, 5);                         // a prompt shorter than 2P
    }

    /** With rotary positions (dynamic scaling past 20 steps), prefill and decoding turn q and k at global positions. */
    @Test
    void withRotaryPositionsEverySoftmaxAlgorithmPrefillsAndDecodesLikeOneDevice() throws Exception {
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 2), 2, 0, 24, true);
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 3).withLayout(SequenceLayout.ZIGZAG), 1, 0, 36, true);
        decodesLikeOneDevice(ParallelStrategy.sequence("ring", 4), 2, 9, 40, true);
        decodesLikeOneDevice(ParallelStrategy.sequence("attention2d", 4), 2, 0, 32, true);
        decodesLikeOneDevice(ParallelStrategy.sequence("wallfacer", 4), 2, 0, 32, true);
        decodesLikeOneDevice(ParallelStrategy.sequence("ulysses", 2), 2, 0, 30, true);
        decodesLikeOneDevice(ParallelStrategy.sequence("allgather", 3), 2, 0, 33, true);
    }

    @Test
    void twoSequenceGroupsDecodeTheirOwnPrompts() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        MultiLayerNetwork net = net(2, 0, 3);
        INDArray[] x = {tokens(1, 1, 30), tokens(2, 1, 30)};
        List<List<INDArray>> expected = List.of(reference(net.clone(), x[0], 20), reference(net.clone(), x[1], 20));
        ParallelStrategy strategy = ParallelStrategy.sequence("ring", 2).withDataParallel(2);
        List<MultiLayerNetwork> copies = List.of(net.clone(), net.clone(), net.clone(), net.clone());
        List<List<INDArray>> got = TrainingFixtures.onWorkers(4, t -> {
            Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
            DistributedDecoder decoder = DistributedDecoder.of(copies.get(t.rank()), t, strategy);
            INDArray mine = x[t.rank() / 2];
            List<INDArray> out = new ArrayList<>(List.of(decoder.prefill(steps(mine, 0, 20), 10)));
            // Each worker's caches hold its share: 10 prompt steps and 5 of the 10 new ones, K and V of 2 heads of
            // 4 float64 values and a position, in 2 layers (one device would hold 30 steps).
            assertEquals(15 * (2 * 2 * 4 * 8 + 4) * 2, org.attn4j.layers.KeyValueCaches.bytes(copies.get(t.rank())));
            int at = 20;
            for (int cut : CUTS) {
                out.add(decoder.step(steps(mine, at, at + cut)));
                at += cut;
            }
            return out;
        });
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < got.get(r).size(); i++) {
                INDArray e = expected.get(r / 2).get(i);
                double err = got.get(r).get(i).sub(e).amaxNumber().doubleValue() / e.amaxNumber().doubleValue();
                assertTrue(err <= 1e-10, "worker " + r + ", output " + i + ": " + err);
            }
        }
    }

    @Test
    void refusesLinearAlgorithmsAndLinearLayers() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<String> messages = TrainingFixtures.onWorkers(2, t -> {
            IllegalArgumentException lasp = assertThrows(IllegalArgumentException.class,
                    () -> DistributedDecoder.of(net(2, 0, 1), t, ParallelStrategy.sequence("lasp", 2)));
            Layer linear = new LinearAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(2).causal(true).build();
            MultiLayerNetwork withLinear = new MultiLayerNetwork(new NeuralNetConfiguration.Builder()
                    .dataType(DataType.DOUBLE).list()
                    .layer(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(WIDTH)
                            .outputDataFormat(RNNFormat.NCW).build())
                    .layer(linear)
                    .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                            .nIn(WIDTH).nOut(VOCAB).dataFormat(RNNFormat.NCW).build()).build());
            withLinear.init();
            DistributedDecoder d = DistributedDecoder.of(withLinear, t, ParallelStrategy.sequence("ring", 2));
            Exception e = assertThrows(Exception.class, () -> d.prefill(tokens(1, 1, 8)));
            return lasp.getMessage() + " | " + e.getMessage();
        });
        for (String m : messages) {
            assertTrue(m.contains("decoding needs a softmax algorithm") && m.contains("decode linear attention on one "
                    + "device"), m);
        }
        assertEquals(2, messages.size());
    }
}
