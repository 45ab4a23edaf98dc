package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.File;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.deeplearning4j.datasets.iterator.ExistingDataSetIterator;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.optimize.api.BaseTrainingListener;
import org.deeplearning4j.optimize.listeners.CheckpointListener;
import org.deeplearning4j.optimize.listeners.ScoreIterationListener;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * DL4J's own listeners through the trainer at ZeRO stage 3: they see whole, current parameters (the very
 * parameters a stage-0 run has at the same iteration), epochs start, end and advance, and DL4J's
 * {@link CheckpointListener} in epoch mode saves models that reload to the live network's outputs, without making
 * DL4J allocate optimizer state for the whole vector.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ZeroListenersTest {

    private static final int STEPS_PER_EPOCH = 3;
    private static final int EPOCHS = 2;

    @TempDir
    Path dir;

    /** What one worker saw: the parameters at every iterationDone, the epoch events, and its final network. */
    private record Seen(List<INDArray> params, List<String> events, MultiLayerNetwork net, Path checkpoints) {
    }

    @Test
    void dl4jListenersSeeWholeCurrentParametersAndEpochsAtStage3() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS_PER_EPOCH, 4, 16, 21);
        List<Seen> stage0 = train(ZeroStage.NONE, batches, "zero0");
        List<Seen> stage3 = train(ZeroStage.PARAMETERS, batches, "zero3");

        for (Seen s : stage3) {
            assertEquals(List.of("start 0", "end 0", "start 1", "end 1"), s.events());
            assertEquals(EPOCHS, s.net().getEpochCount(), "the epoch count advances");
            assertEquals(STEPS_PER_EPOCH * EPOCHS, s.params().size());
            for (int i = 0; i < s.params().size(); i++) {
                INDArray expected = stage0.get(0).params().get(i);
                double scale = expected.norm2Number().doubleValue();
                assertEquals(0.0, s.params().get(i).sub(expected).norm2Number().doubleValue() / scale, 1e-10,
                        "parameters a listener sees at iteration " + i + " equal the stage-0 run's");
            }
            assertNull(s.net().getUpdater().getStateViewArray(), "no DL4J optimizer state for the whole vector");

            File[] saved = s.checkpoints().toFile().listFiles((d, n) -> n.endsWith(".zip"));
            assertEquals(EPOCHS, saved.length, "one checkpoint per epoch");
            MultiLayerNetwork last = CheckpointListener.loadLastCheckpointMLN(s.checkpoints().toFile());
            INDArray features = batches.get(0).getFeatures();
            assertEquals(s.net().output(features), last.output(features), "reloaded model gives the live outputs");
        }
    }

    private List<Seen> train(ZeroStage zero, List<DataSet> batches, String name) throws Exception {
        return TrainingFixtures.onWorkers(4, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, 2, 13);
            Path ck = java.nio.file.Files.createDirectories(dir.resolve(name + "-rank" + t.rank()));
            List<INDArray> params = new ArrayList<>();
            List<String> events = new ArrayList<>();
            net.setListeners(new ScoreIterationListener(1), new CheckpointListener.Builder(ck.toFile())
                    .saveEveryNEpochs(1).keepAll().deleteExisting(true).build());
            DistributedTrainer trainer = DistributedTrainer.builder(net, t)
                    .strategy(ParallelStrategy.sequence("ring", 4).withZero(zero))
                    .listeners(new BaseTrainingListener() {
                        @Override
                        public void iterationDone(Model model, int iteration, int epoch) {
                            params.add(model.params().dup());
                        }

                        @Override
                        public void onEpochStart(Model model) {
                            events.add("start " + ((MultiLayerNetwork) model).getEpochCount());
                        }

                        @Override
                        public void onEpochEnd(Model model) {
                            events.add("end " + ((MultiLayerNetwork) model).getEpochCount());
                        }
                    }).build();
            ExistingDataSetIterator data = new ExistingDataSetIterator(batches);
            for (int e = 0; e < EPOCHS; e++) {
                trainer.fit(data);
            }
            return new Seen(params, events, net, ck);
        });
    }
}
