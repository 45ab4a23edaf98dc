package org.attn4j.samples.bench;

import java.util.Locale;
import java.util.Random;

import org.attn4j.samples.metrics.PeakMemory;
import org.attn4j.samples.train.GptGraph;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One configuration of {@code attn4j bench training} in its own process (so a layer that runs out of memory
 * takes only its own JVM down): args {@code KIND N BATCH STEPS}. Trains the GPT-like model two untimed and then
 * {@code STEPS} timed steps on random bytes and prints {@code RESULT kind,n,batch,tokens_per_second,peak_bytes},
 * or {@code FAILED kind,n,reason} and exits 1.
 */
public final class TrainingBenchWorker {

    static final String RESULT = "RESULT ";
    static final String FAILED = "FAILED ";

    private TrainingBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        String kind = args[0];
        int n = Integer.parseInt(args[1]);
        int b = Integer.parseInt(args[2]);
        int steps = Integer.parseInt(args[3]);
        try {
            Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
            GptGraph model = new GptGraph(256, n, 64, 4, 4, 2, GptGraph.Attention.valueOf(kind.toUpperCase(
                    Locale.ROOT)), DataType.FLOAT, 1e-3, 1);
            ComputationGraph net = model.build();
            DataSet data = randomBytes(b, n);
            PeakMemory.collectGarbage();
            PeakMemory memory = PeakMemory.start();
            for (int i = 0; i < 2; i++) {
                net.fit(data);
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < steps; i++) {
                net.fit(data);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            PeakMemory.Reading peak = memory.stop();
            if (!Double.isFinite(net.score())) {
                System.out.println(FAILED + kind + "," + n + ",loss is " + net.score());
                System.exit(1);
            }
            System.out.printf(Locale.ROOT, "%s%s,%d,%d,%.1f,%d%n", RESULT, kind, n, b, (double) b * n * steps / seconds,
                    peak.peakBytes());
        } catch (Throwable e) {
            System.out.println(FAILED + kind + "," + n + "," + e.getClass().getSimpleName() + ": "
                    + String.valueOf(e.getMessage()).lines().findFirst().orElse(""));
            System.out.flush();
            System.exit(1);
        }
        System.out.flush();
    }

    private static DataSet randomBytes(int b, int n) {
        Random rnd = new Random(n);
        INDArray features = Nd4j.zeros(DataType.FLOAT, b, 1, n);
        INDArray labels = Nd4j.zeros(DataType.FLOAT, b, 256, n);
        for (int i = 0; i < b; i++) {
            for (int t = 0; t < n; t++) {
                features.putScalar(new int[] {i, 0, t}, rnd.nextInt(256));
                labels.putScalar(new int[] {i, rnd.nextInt(256), t}, 1.0);
            }
        }
        return new DataSet(features, labels);
    }
}
