package org.attn4j.samples.bench;

import java.nio.file.Path;
import java.util.Locale;
import java.util.Random;

import org.attn4j.models.hf.HfConfig;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.models.hf.HfFineTuner;
import org.attn4j.samples.metrics.PeakMemory;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One measurement of {@code attn4j bench llama}, in a process of its own so that its peak resident memory is its
 * alone: args {@code CONFIG LAYERS MODE N BATCH COUNT [CHECKPOINTING [UNTIMED]]}. Builds the model of CONFIG (LAYERS > 0 replaces its
 * layer count) with random weights in float32; {@code decode}: a prompt of N random tokens (not timed), then COUNT
 * greedy tokens with the key/value cache, timed; {@code train}: UNTIMED steps (default 1), then COUNT timed fine-tuning
 * steps (forward, backward, Adam at 1e-5, as the anchor's) on BATCH sequences of N random tokens, each predicting
 * the next, with activation checkpointing when CHECKPOINTING is true. Prints
 * {@code RESULT mode,n,batch,tokens_per_s,peak_rss_mb} (the process's peak resident memory, {@code VmHWM}); a
 * failure prints {@code FAILED reason} (one line) and exits 1.
 */
public final class LlamaBenchWorker {

    private LlamaBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        try {
            HfConfig c = HfConfig.readFile(Path.of(args[0]));
            int layers = Integer.parseInt(args[1]);
            if (layers > 0) {
                c = c.withLayers(layers);
            }
            String mode = args[2];
            int n = Integer.parseInt(args[3]);
            int batch = Integer.parseInt(args[4]);
            int count = Integer.parseInt(args[5]);
            Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
            HfDecoder model = HfDecoder.random(c, DataType.FLOAT, 1)
                    .activationCheckpointing(args.length > 6 && Boolean.parseBoolean(args[6]));
            double tokensPerSecond = switch (mode) {
                case "decode" -> decode(model, n, batch, count);
                case "train" -> train(model, n, batch, count, args.length > 7 ? Integer.parseInt(args[7]) : 1);
                default -> throw new IllegalArgumentException("mode must be decode or train, got " + mode);
            };
            System.out.printf(Locale.ROOT, "%s%s,%d,%d,%.1f,%.0f%n", WorkerLines.RESULT, mode, n, batch, tokensPerSecond,
                    PeakMemory.processPeakBytes() / (1024.0 * 1024.0));
            System.out.flush();
        } catch (Throwable e) {
            WorkerLines.fail(e);
        }
    }

    /**
     * Greedy tokens per second with the key/value cache after a prompt of {@code n} random tokens; a short
     * untimed generation first (the JIT), as the anchor does.
     */
    private static double decode(HfDecoder model, int n, int batch, int newTokens) {
        if (batch != 1) {
            throw new IllegalArgumentException("decode runs one sequence (batch 1), got batch " + batch);
        }
        Random rnd = new Random(0);
        int vocab = model.config().vocab();
        model.generate(random(rnd, 16, vocab), 4, 0, 0, 1, 0);
        model.prefill(random(rnd, n, vocab), newTokens);
        long next = 0;
        long t0 = System.nanoTime();
        for (int i = 0; i < newTokens; i++) {
            float[] p = model.step(next).toFloatVector();         // the argmax in Java, as generate does
            int best = 0;
            for (int j = 1; j < p.length; j++) {
                if (p[j] > p[best]) {
                    best = j;
                }
            }
            next = best;
        }
        return newTokens / ((System.nanoTime() - t0) / 1e9);
    }

    /**
     * Tokens per second of whole fine-tuning steps ({@code fit}: forward, backward, Adam) on {@code batch} sequences
     * of {@code n} random tokens, as the anchor counts them; each position predicts the next token (the last one,
     * with nothing to predict, is masked out of the loss), so {@code n - 1} tokens per sequence are scored. The
     * batches are made before the clock starts; one step runs before it (the JIT, the updater's state).
     *
     * @throws IllegalStateException if the loss is not finite
     */
    private static double train(HfDecoder model, int n, int batch, int steps, int untimed) {
        if (n < 2) {
            throw new IllegalArgumentException("train needs sequences of at least 2 tokens, got " + n);
        }
        ComputationGraph graph = model.graph();
        graph.setLearningRate(1e-5);
        Random rnd = new Random(0);
        int vocab = model.config().vocab();
        for (int s = 0; s < untimed; s++) {
            graph.fit(batch(rnd, n, batch, vocab));
        }
        double took = 0;
        for (int s = 0; s < steps; s++) {
            DataSet d = batch(rnd, n, batch, vocab);
            long t0 = System.nanoTime();
            graph.fit(d);
            took += (System.nanoTime() - t0) / 1e9;
            if (!Double.isFinite(graph.score())) {
                throw new IllegalStateException("train: the loss is " + graph.score() + " at step " + s);
            }
        }
        return (double) steps * batch * n / took;
    }

    /**
     * {@code b} sequences of {@code n} random ids as a fine-tuning batch ({@link HfFineTuner#batch}): the next ids as
     * labels, the last position unscored.
     */
    private static DataSet batch(Random rnd, int n, int b, int vocab) {
        long[][] tokens = new long[b][];
        for (int i = 0; i < b; i++) {
            tokens[i] = random(rnd, n, vocab);
        }
        return HfFineTuner.batch(tokens, DataType.FLOAT);
    }

    private static long[] random(Random rnd, int n, int vocab) {
        long[] t = new long[n];
        for (int i = 0; i < n; i++) {
            t[i] = rnd.nextInt(vocab);
        }
        return t;
    }
}
