package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** {@link DistributedTrainer#fitGroup}: each data-parallel group passes only its examples, as if all passed all. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class GroupBatchTest {

    @Test
    void eachGroupPassingItsOwnExamplesEqualsEveryonePassingTheWholeBatch() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        int steps = 6;
        long seed = 17;
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, steps, 4, 16, seed);
        double[] expected = DistributedTrainerParityTest.singleProcess(DataType.DOUBLE, false,
                TrainingFixtures.HEADS / 2, seed, batches);
        ParallelStrategy s = ParallelStrategy.sequence("ring", 2).withDataParallel(2).withZero(ZeroStage.GRADIENTS);
        List<double[]> curves = TrainingFixtures.onWorkers(4, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, TrainingFixtures.HEADS / 2, seed);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(s).build();
            double[] curve = new double[steps];
            for (int i = 0; i < steps; i++) {
                int g = trainer.dataParallelIndex();
                DataSet whole = batches.get(i);
                DataSet mine = new DataSet(whole.getFeatures().get(NDArrayIndex.interval(2 * g, 2 * g + 2)).dup(),
                        whole.getLabels().get(NDArrayIndex.interval(2 * g, 2 * g + 2)).dup(), null,
                        whole.getLabelsMaskArray() == null ? null
                                : whole.getLabelsMaskArray().get(NDArrayIndex.interval(2 * g, 2 * g + 2)).dup());
                curve[i] = trainer.fitGroup(mine);
            }
            return curve;
        });
        for (double[] curve : curves) {
            for (int i = 0; i < steps; i++) {
                assertEquals(expected[i], curve[i], 1e-6 * Math.abs(expected[i]), "step " + i);
            }
        }
    }
}
