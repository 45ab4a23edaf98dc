package org.attn4j.samples.bench;

import java.util.Locale;
import java.util.Random;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.training.DistributedDecoder;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.layers.KeyValueCaches;
import org.attn4j.samples.train.GptGraph;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One rank of {@code attn4j bench prefill}: args {@code ALGORITHM N ROUNDS STEPS}. Builds the GPT-like model of
 * {@code attn4j train} (the same seed on every rank), prefills a random prompt of N bytes over the job with
 * {@link DistributedDecoder} ({@code ROUNDS} times, after an untimed round at a shorter prompt), then decodes
 * {@code STEPS} bytes; rank 0 prints
 * {@code RESULT algorithm,P,N,first_token_ms,ms_per_token,cache_bytes} (medians; the cache of rank 0). A rank that
 * fails prints {@code FAILED reason} (one line) and exits 1.
 */
public final class PrefillBenchWorker {

    private PrefillBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        String algorithm = args[0];
        int n = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        int steps = Integer.parseInt(args[3]);
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        try {
            run(algorithm, n, rounds, steps);
        } catch (Throwable e) {
            WorkerLines.fail(e);
        }
    }

    private static void run(String algorithm, int n, int rounds, int steps) {
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            ComputationGraph net = new GptGraph(256, n + steps + 1, 64, 4, 4, 2, GptGraph.Attention.FLASH,
                    DataType.FLOAT, 1e-3, 1).build();
            DistributedDecoder decoder = DistributedDecoder.of(net, t, ParallelStrategy.sequence(algorithm,
                    t.worldSize()));
            Communicator world = Communicator.world(t);
            INDArray prompt = bytes(n, 1);
            decode(decoder, bytes(Math.min(n, 1024), 2), steps);               // untimed: the JIT
            double[] first = new double[rounds];
            double[] perToken = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                world.barrier();
                long t0 = System.nanoTime();
                decoder.prefill(prompt, steps);
                first[r] = (System.nanoTime() - t0) / 1e6;
                perToken[r] = GemmRate.median(steps(decoder, steps));
            }
            long cache = KeyValueCaches.bytes(net);
            world.barrier();                                    // no rank closes while another still receives
            if (t.rank() == 0) {
                System.out.printf(Locale.ROOT, "%s%s,%d,%d,%.2f,%.3f,%d%n", WorkerLines.RESULT, algorithm, t.worldSize(), n,
                        GemmRate.median(first), GemmRate.median(perToken), cache);
                System.out.flush();
            }
        }
    }

    private static void decode(DistributedDecoder decoder, INDArray prompt, int steps) {
        decoder.prefill(prompt, steps);
        steps(decoder, steps);
    }

    /** The time of each of {@code steps} one-byte steps, ms. */
    private static double[] steps(DistributedDecoder decoder, int steps) {
        double[] ms = new double[steps];
        for (int i = 0; i < steps; i++) {
            INDArray one = Nd4j.zeros(DataType.FLOAT, 1, 1, 1).putScalar(0, (7 * i + 3) % 256);
            long t0 = System.nanoTime();
            decoder.step(one);
            ms[i] = (System.nanoTime() - t0) / 1e6;
        }
        return ms;
    }

    private static INDArray bytes(int n, long seed) {
        Random rnd = new Random(seed);
        INDArray t = Nd4j.zeros(DataType.FLOAT, 1, 1, n);
        for (int i = 0; i < n; i++) {
            t.putScalar(new int[] {0, 0, i}, rnd.nextInt(256));
        }
        return t;
    }
}
