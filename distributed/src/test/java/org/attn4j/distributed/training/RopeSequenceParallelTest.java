package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.PackedSequences;
import org.attn4j.ops.Documents;
import org.attn4j.ops.rope.RotaryEmbedding;
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
import org.nd4j.linalg.learning.config.Sgd;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * RoPE under every softmax sequence-parallel algorithm and layout equals one device: a network of two causal
 * attention layers with rotary embeddings (rotate-half with half the features, and interleaved with dynamic NTK
 * scaling, whose length must be the global one, never a shard's) trains three
 * SGD steps on P = 2, 3 and 4 in-JVM workers (ATTENTION2D on its square grid of 4; Ulysses where P divides the
 * heads), without documents and with packed documents under both position rules
 * (running on, restarting per document), and every worker's loss curve equals the one-process run's to 1e-10
 * relative, float64. The first loss checks the forward pass (each worker rotates its shard at the global positions),
 * the later ones the backward pass (the inverse rotation of dq and dk).
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class RopeSequenceParallelTest {

    private static final int STEPS = 3;
    private static final int BATCH = 2;
    private static final int LENGTH = 24;
    private static final int WIDTH = 16;
    private static final int HEADS = 4;

    /** How the batch is packed. */
    enum Packed { NONE, RUNNING_ON, RESTARTING }

    static Stream<Arguments> cases() {
        List<Arguments> cases = new ArrayList<>();
        for (Packed packed : Packed.values()) {
            for (int p = 2; p <= 4; p++) {
                cases.add(Arguments.of("ring", p, SequenceLayout.CONTIGUOUS, packed));
                cases.add(Arguments.of("ring", p, SequenceLayout.ZIGZAG, packed));
                cases.add(Arguments.of("ring", p, SequenceLayout.STRIPED, packed));
                cases.add(Arguments.of("wallfacer", p, null, packed));
                cases.add(Arguments.of("allgather", p, null, packed));
                if (HEADS % p == 0) {                              // Ulysses splits the heads over the workers
                    cases.add(Arguments.of("ulysses", p, null, packed));
                }
            }
            cases.add(Arguments.of("attention2d", 4, null, packed));            // a square grid of workers
            cases.add(Arguments.of("attention2d-overlap", 4, null, packed));
        }
        return cases.stream();
    }

    @ParameterizedTest(name = "{0} P={1} {2} documents={3}")
    @MethodSource("cases")
    void lossCurveEqualsOneDevice(String algorithm, int p, SequenceLayout layout, Packed packed) throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        long seed = 97 + algorithm.hashCode() + 7L * p + packed.ordinal();
        int kvHeads = algorithm.equals("ulysses") ? HEADS : HEADS / 2;
        boolean restart = packed == Packed.RESTARTING;
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, seed);
        List<Documents> docs = new ArrayList<>();
        for (int i = 0; i < STEPS && packed != Packed.NONE; i++) {
            Documents d = Documents.random(seed + i, BATCH, LENGTH, 5);
            docs.add(d);
            Packing.attach(batches.get(i), d);
        }
        double[] expected = new double[STEPS];
        MultiLayerNetwork one = network(kvHeads, restart, seed);
        for (int i = 0; i < STEPS; i++) {
            try (PackedSequences.Scope s = docs.isEmpty() ? null : PackedSequences.enter(docs.get(i))) {
                one.fit(batches.get(i));
            }
            expected[i] = one.score();
        }
        if (packed == Packed.RESTARTING) {
            MultiLayerNetwork runningOn = network(kvHeads, false, seed);
            try (PackedSequences.Scope s = PackedSequences.enter(docs.get(0))) {
                runningOn.fit(batches.get(0));
            }
            // RoPE scores depend on distances only, so restarting changes nothing but dynamic scaling's length
            assertNotEquals(expected[0], runningOn.score(), "restarting positions changes dynamic scaling's run");
        }

        ParallelStrategy strategy = ParallelStrategy.sequence(algorithm, p);
        if (layout != null) {
            strategy = strategy.withLayout(layout);
        }
        if (algorithm.equals("wallfacer")) {
            strategy = strategy.withOption("team", p == 4 ? 2 : 1);
        }
        ParallelStrategy s = strategy;
        List<double[]> curves = TrainingFixtures.onWorkers(p, t -> {
            DistributedTrainer trainer = DistributedTrainer.builder(network(kvHeads, restart, seed), t).strategy(s)
                    .build();
            double[] curve = new double[STEPS];
            for (int i = 0; i < STEPS; i++) {
                curve[i] = trainer.fit(batches.get(i));
            }
            return curve;
        });
        assertEquals(p, curves.size());
        for (int r = 0; r < p; r++) {
            for (int i = 0; i < STEPS; i++) {
                double rel = Math.abs(curves.get(r)[i] - expected[i]) / Math.abs(expected[i]);
                assertTrue(rel <= 1e-10, s + " rank " + r + " step " + i + ": relative " + rel
                        + "\n  workers    " + Arrays.toString(curves.get(r)) + "\n  one device " + Arrays.toString(
                        expected));
            }
        }
    }

    /**
     * Embedding, two causal attention layers with RoPE (the second interleaved, with dynamic scaling from the global
     * length: N, or the longest document when positions restart), softmax; SGD.
     */
    private static MultiLayerNetwork network(int kvHeads, boolean restart, long seed) {
        RotaryEmbedding half = RotaryEmbedding.builder().theta(20).partialRotaryFactor(0.5).build();
        RotaryEmbedding dynamic = RotaryEmbedding.builder().theta(50).layout(RotaryEmbedding.Layout.INTERLEAVED)
                .scaling(RotaryEmbedding.Scaling.DYNAMIC, 4).maxPositions(3).build();
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(DataType.DOUBLE).updater(new Sgd(0.5)).weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(TrainingFixtures.VOCAB).nOut(WIDTH)
                        .outputDataFormat(RNNFormat.NCW).build())
                .layer(new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(HEADS).nKvHeads(kvHeads)
                        .causal(true).rope(half).ropeRestartsPerDocument(restart).build())
                .layer(new FlashAttentionLayer.Builder().nIn(WIDTH).nOut(WIDTH).nHeads(HEADS).nKvHeads(kvHeads)
                        .causal(true).rope(dynamic).ropeRestartsPerDocument(restart).activation(Activation.TANH).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(WIDTH).nOut(TrainingFixtures.VOCAB).dataFormat(RNNFormat.NCW).build())
                .build());
        net.init();
        return net;
    }
}
