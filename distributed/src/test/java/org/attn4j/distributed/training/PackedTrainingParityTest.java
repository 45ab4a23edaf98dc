package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.layers.PackedSequences;
import org.attn4j.ops.Documents;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Packed sequences through {@link DistributedTrainer}: batches carry document ids ({@link Packing}); the trainer
 * hands every worker its data-parallel group's ids for the whole sequence, and the loss curve equals the
 * single-process run of the same network with the same documents ({@link PackedSequences}), float64 to 1e-6.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class PackedTrainingParityTest {

    private static final int STEPS = 8;
    private static final int BATCH = 4;
    private static final int LENGTH = 16;

    @ParameterizedTest(name = "{0} DP={1} SP={2} {3}")
    @CsvSource({"ring, 1, 4, NONE", "ring, 2, 2, GRADIENTS", "attention2d, 1, 4, NONE", "lasp, 1, 4, NONE",
        "ulysses, 2, 2, NONE"})
    void lossCurveEqualsTheSingleProcessRunWithTheSameDocuments(String name, int dp, int sp, ZeroStage zero)
            throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        boolean linear = name.equals("lasp");
        int kvHeads = name.equals("ulysses") ? TrainingFixtures.HEADS : TrainingFixtures.HEADS / 2;
        long seed = 7 + name.hashCode();
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, seed);
        List<Documents> docs = new ArrayList<>();
        for (int i = 0; i < STEPS; i++) {
            Documents d = Documents.random(seed + i, BATCH, LENGTH, 6);
            docs.add(d);
            Packing.attach(batches.get(i), d);
        }
        double[] expected = singleProcess(linear, kvHeads, seed, batches, docs);
        double[] unpacked = DistributedTrainerParityTest.singleProcess(DataType.DOUBLE, linear, kvHeads, seed,
                batches);
        assertNotEquals(unpacked[STEPS - 1], expected[STEPS - 1], "documents should change the run");

        ParallelStrategy strategy = DistributedTrainerParityTest.strategy(name, sp).withDataParallel(dp)
                .withZero(zero);
        if (name.equals("ring")) {
            strategy = strategy.withLayout(SequenceLayout.STRIPED);          // the even layout for documents
        }
        ParallelStrategy s = strategy;
        List<double[]> curves = TrainingFixtures.onWorkers(dp * sp, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, linear, kvHeads, seed);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(s).build();
            double[] curve = new double[STEPS];
            for (int i = 0; i < STEPS; i++) {
                curve[i] = trainer.fit(batches.get(i));
            }
            return curve;
        });
        assertEquals(dp * sp, curves.size());
        for (int r = 0; r < curves.size(); r++) {
            for (int i = 0; i < STEPS; i++) {
                double rel = Math.abs(curves.get(r)[i] - expected[i]) / Math.abs(expected[i]);
                assertTrue(rel <= 1e-6, s + " rank " + r + " step " + i + ": " + curves.get(r)[i] + " vs "
                        + expected[i] + "\n  distributed " + Arrays.toString(curves.get(r))
                        + "\n  single      " + Arrays.toString(expected));
            }
        }
    }

    private static double[] singleProcess(boolean linear, int kvHeads, long seed, List<DataSet> batches,
                                          List<Documents> docs) {
        MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, linear, kvHeads, seed);
        double[] curve = new double[batches.size()];
        for (int i = 0; i < batches.size(); i++) {
            try (PackedSequences.Scope scope = PackedSequences.enter(docs.get(i))) {
                net.fit(batches.get(i));
            }
            curve[i] = net.score();
        }
        return curve;
    }
}
