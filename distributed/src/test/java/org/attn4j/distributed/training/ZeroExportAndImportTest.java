package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A sharded checkpoint of any ZeRO stage consolidates into an ordinary DL4J model that plain DL4J loads with the
 * trained workers' outputs; and a network DL4J trained before hands its Adam state over to the trainer's slices.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ZeroExportAndImportTest {

    @TempDir
    Path dir;

    @ParameterizedTest(name = "stage {0}")
    @EnumSource(ZeroStage.class)
    void anExportedCheckpointLoadsInPlainDl4jWithTheWorkersOutputs(ZeroStage zero) throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, 4, 4, 16, 3);
        Path ck = dir.resolve("ck");
        INDArray features = batches.get(0).getFeatures();
        List<INDArray> outputs = TrainingFixtures.onWorkers(4, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, 2, 17);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t)
                    .strategy(ParallelStrategy.sequence("ring", 4).withZero(zero))
                    .checkpoints(ck, 2).build();
            for (DataSet b : batches) {
                trainer.fit(b);
            }
            return net.output(features);
        });

        Path zip = dir.resolve("model.zip");
        assertEquals(4, CheckpointExport.export(ck, zip), "the newest checkpoint is step 4");
        MultiLayerNetwork plain = MultiLayerNetwork.load(zip.toFile(), false);
        MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(zip.toFile());
        assertEquals(4, plain.getIterationCount());
        for (INDArray o : outputs) {
            assertEquals(o, plain.output(features));
            assertEquals(o, restored.output(features));
        }
    }

    @Test
    void exportRefusesADirectoryWithoutACompleteCheckpoint() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CheckpointExport.export(dir.resolve("empty"), dir.resolve("m.zip")));
        assertTrue(e.getMessage().contains("no complete checkpoint"), e.getMessage());
    }

    @Test
    void continuesFromTheAdamStateOfANetworkDl4jTrained() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, 6, 4, 16, 9);
        MultiLayerNetwork reference = TrainingFixtures.gpt(DataType.DOUBLE, false, 2, 19);
        for (int i = 0; i < 3; i++) {
            reference.fit(batches.get(i));
        }
        MultiLayerNetwork warm = reference.clone();
        assertNotNull(warm.getUpdater().getStateViewArray());
        double[] expected = new double[3];
        for (int i = 3; i < 6; i++) {
            reference.fit(batches.get(i));
            expected[i - 3] = reference.score();
        }
        byte[] saved = toBytes(warm);
        List<double[]> curves = TrainingFixtures.onWorkers(2, t -> {
            MultiLayerNetwork net = ModelSerializer.restoreMultiLayerNetwork(new java.io.ByteArrayInputStream(saved),
                    true);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t)
                    .strategy(ParallelStrategy.sequence("ring", 2)
                            .withZero(ZeroStage.OPTIMIZER_STATE)).build();
            double[] c = new double[3];
            for (int i = 3; i < 6; i++) {
                trainer.fit(batches.get(i));
                c[i - 3] = net.score();
            }
            return c;
        });
        for (double[] c : curves) {
            for (int i = 0; i < 3; i++) {
                assertEquals(expected[i], c[i], 1e-6 * Math.abs(expected[i]), "step " + (i + 3));
            }
        }
    }

    private static byte[] toBytes(MultiLayerNetwork net) throws java.io.IOException {
        java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
        ModelSerializer.writeModel(net, out, true);
        return out.toByteArray();
    }
}
