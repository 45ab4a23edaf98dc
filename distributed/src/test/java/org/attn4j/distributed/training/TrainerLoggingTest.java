package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.optimize.listeners.PerformanceListener;
import org.deeplearning4j.optimize.listeners.ScoreIterationListener;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * What a library user sees while DistributedTrainer trains: rank 0's progress lines through slf4j every
 * {@code logEvery} steps, and DL4J's own ScoreIterationListener and PerformanceListener, passed to the trainer.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TrainerLoggingTest {

    @Test
    void rankZeroLogsProgressAndDl4jListenersReport() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, 4, 4, 16, 5);
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            TrainingFixtures.onWorkers(2, t -> {
                MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, 2, 13);
                DistributedTrainer trainer = DistributedTrainer.builder(net, t)
                        .strategy(ParallelStrategy.sequence("ring", 2)).logEvery(2)
                        .listeners(new ScoreIterationListener(1), new PerformanceListener(1, true)).build();
                for (DataSet b : batches) {
                    trainer.fit(b);
                }
                return null;
            });
        } finally {
            System.setErr(err);
        }
        List<String> lines = List.of(captured.toString(StandardCharsets.UTF_8).split("\n"));
        String all = String.join("\n", lines);
        for (int step : new int[] {2, 4}) {
            assertEquals(1, lines.stream().filter(l -> l.contains("DistributedTrainer - step " + step + " loss ")
                    && l.endsWith(" tokens/s)")).count(), "one progress line per 2 steps, from rank 0\n" + all);
        }
        assertEquals(2, lines.stream().filter(l -> l.contains("DistributedTrainer - step ")).count(), all);
        assertEquals(8, lines.stream().filter(l -> l.contains("Score at iteration")).count(),
                "ScoreIterationListener on both workers, every step\n" + all);
        assertTrue(lines.stream().filter(l -> l.contains("PerformanceListener")).count() >= 6,
                "PerformanceListener reports\n" + all);
    }
}
