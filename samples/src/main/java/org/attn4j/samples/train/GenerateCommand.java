package org.attn4j.samples.train;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.Callable;

import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.KeyValueCaches;
import org.attn4j.samples.UserInputException;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.util.ModelSerializer;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j generate}: continues a prompt with a text model that {@code attn4j train --text FILE} wrote,
 * one byte at a time, sampling each next byte from the model's softmax at a temperature (0: the most likely),
 * among the {@code --top-k} most likely. The prompt goes through the network in one {@code rnnTimeStep} call, then
 * each new byte in one call of one step: the attention layers keep their keys and values (linear attention its
 * state), so a step costs one query against the cache instead of a pass over the whole window. The model has
 * positions up to its training length: when the text reaches it, the latest half of it is fed again as a new
 * prompt. The generated text goes to standard output, the speed and the cache's size to standard error.
 */
@Command(name = "generate", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Continue a prompt with a text model trained by attn4j train --text.")
public final class GenerateCommand implements Callable<Integer> {

    @Option(names = "--checkpoint", paramLabel = "DIR", required = true,
            description = "The --out directory of attn4j train (model.zip and summary.json).")
    Path checkpoint;

    @Option(names = "--prompt", paramLabel = "TEXT", required = true, description = "The text to continue.")
    String prompt;

    @Option(names = {"--max-new-tokens", "--length"}, paramLabel = "BYTES", defaultValue = "200",
            description = "Bytes to generate (default: ${DEFAULT-VALUE}).")
    int length;

    @Option(names = "--top-k", paramLabel = "K", defaultValue = "0",
            description = "Sample among the K most likely bytes only, 0 for all (default: ${DEFAULT-VALUE}).")
    int topK;

    @Option(names = "--max-cache-mb", paramLabel = "MB", defaultValue = "1024",
            description = "Refuse to start if the attention layers' key/value cache would exceed this (default: "
                    + "${DEFAULT-VALUE}).")
    double maxCacheMb;

    @Option(names = "--temperature", paramLabel = "T", defaultValue = "0.8",
            description = "Sampling temperature, 0 for the most likely byte (default: ${DEFAULT-VALUE}).")
    double temperature;

    @Option(names = "--seed", paramLabel = "SEED", defaultValue = "1",
            description = "Sampling seed (default: ${DEFAULT-VALUE}).")
    long seed;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        Path summaryFile = checkpoint.resolve("summary.json");
        Path modelFile = checkpoint.resolve("model.zip");
        if (!Files.isRegularFile(summaryFile) || !Files.isRegularFile(modelFile)) {
            throw new UserInputException("--checkpoint " + checkpoint + ": expected summary.json and model.zip "
                    + "written by attn4j train");
        }
        JsonNode summary = new ObjectMapper().readTree(summaryFile.toFile());
        if (summary.path("vocab").asInt() != 256 || summary.path("text").isNull()) {
            throw new UserInputException("--checkpoint " + checkpoint + " holds a model of task '"
                    + summary.path("task").asText() + "' (vocabulary " + summary.path("vocab").asInt() + "); "
                    + "generate needs a text model (attn4j train --text FILE)");
        }
        if (length < 1 || !(temperature >= 0) || topK < 0 || !(maxCacheMb > 0)) {
            throw new UserInputException("--max-new-tokens must be >= 1, --temperature >= 0, --top-k >= 0 and "
                    + "--max-cache-mb > 0, got " + length + ", " + temperature + ", " + topK + ", " + maxCacheMb);
        }
        byte[] start = prompt.getBytes(StandardCharsets.UTF_8);
        if (start.length == 0) {
            throw new UserInputException("--prompt is empty");
        }
        int window = summary.path("seq_len").asInt();
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        ComputationGraph net = ModelSerializer.restoreComputationGraph(modelFile.toFile(), false);
        for (org.deeplearning4j.nn.api.Layer l : net.getLayers()) {
            if (l.conf().getLayer() instanceof org.deeplearning4j.nn.conf.layers.SelfAttentionLayer) {
                // DL4J's layer keeps no state between rnnTimeStep calls: each step would attend to itself only.
                throw new UserInputException("--checkpoint " + checkpoint + " holds a model with DL4J's "
                        + "SelfAttentionLayer (attn4j train --attention stock), which keeps no key/value cache; "
                        + "generate needs --attention flash or linear");
            }
        }
        long perToken = cacheBytesPerToken(net);
        long layers = attentionLayers(net);
        long cacheBytes = perToken * Math.min(window, start.length + length);
        if (cacheBytes > maxCacheMb * 1e6) {
            throw new UserInputException(String.format(Locale.ROOT, "the key/value cache would need %.3f MB (%d bytes "
                    + "per token in each of %d attention layers, %d tokens), over --max-cache-mb %s",
                    cacheBytes / 1e6, layers == 0 ? 0 : perToken / layers, layers,
                    Math.min(window, start.length + length),
                    java.math.BigDecimal.valueOf(maxCacheMb).stripTrailingZeros().toPlainString()));
        }
        byte[] text = new byte[start.length + length];
        System.arraycopy(start, 0, text, 0, start.length);
        Random rnd = new Random(seed);
        long t0 = System.nanoTime();
        int from = Math.max(0, start.length - window);
        int steps = (int) Math.min(window, start.length + length);
        double[] next = prefill(net, text, from, start.length, steps);
        long t1 = System.nanoTime();
        int fed = start.length - from;                           // positions used so far
        for (int i = start.length; i < text.length; i++) {
            text[i] = (byte) pick(next, rnd);
            if (i == text.length - 1) {
                break;
            }
            if (fed == window) {                                 // no position left: feed the latest half again
                next = prefill(net, text, i + 1 - window / 2, i + 1, window);
                fed = window / 2;
            } else {
                INDArray in = Nd4j.zeros(DataType.FLOAT, 1, 1, 1).putScalar(0, text[i] & 0xff);
                next = last(net.rnnTimeStep(in)[0]);
                fed++;
            }
        }
        long t2 = System.nanoTime();
        long allocated = KeyValueCaches.bytes(net);
        PrintWriter o = spec.commandLine().getOut();
        o.println(new String(text, StandardCharsets.UTF_8));
        o.flush();
        PrintWriter e = spec.commandLine().getErr();
        e.printf(Locale.ROOT, "generated %d bytes in %.2f s: %.1f tokens/s (prompt of %d bytes in %.1f ms); key/value "
                        + "cache %d bytes per token per layer, %d attention layers, %.3f MB allocated%n", length,
                (t2 - t1) / 1e9, length / ((t2 - t1) / 1e9), start.length - from, (t1 - t0) / 1e6,
                layers == 0 ? 0 : perToken / layers, layers, allocated / 1e6);
        e.flush();
        return 0;
    }

    /**
     * Clears the network's state and feeds {@code text[from, to)} in one call: the distribution after it. The caches
     * are allocated here, once, for {@code steps} steps.
     */
    private static double[] prefill(ComputationGraph net, byte[] text, int from, int to, int steps) {
        net.rnnClearPreviousState();
        KeyValueCaches.reserve(net, steps);
        INDArray in = Nd4j.zeros(DataType.FLOAT, 1, 1, to - from);
        for (int t = from; t < to; t++) {
            in.putScalar(new int[] {0, 0, t - from}, text[t] & 0xff);
        }
        return last(net.rnnTimeStep(in)[0]);
    }

    /** The distribution at the last step of an output {@code [1, vocab, T]}. */
    private static double[] last(INDArray p) {
        return p.get(NDArrayIndex.point(0), NDArrayIndex.all(), NDArrayIndex.point(p.size(2) - 1))
                .castTo(DataType.DOUBLE).toDoubleVector();
    }

    /** Bytes the key/value caches hold per token over all attention layers (float32 K and V, and a position). */
    static long cacheBytesPerToken(ComputationGraph net) {
        long bytes = 0;
        for (org.deeplearning4j.nn.api.Layer l : net.getLayers()) {
            if (l.conf().getLayer() instanceof FlashAttentionLayer f) {
                bytes += KeyValueCaches.bytesPerStep(f, Float.BYTES);
            }
        }
        return bytes;
    }

    private static long attentionLayers(ComputationGraph net) {
        return java.util.Arrays.stream(net.getLayers())
                .filter(l -> l.conf().getLayer() instanceof FlashAttentionLayer).count();
    }

    /**
     * A byte from the distribution at the temperature: the argmax at 0, else p^(1/T) renormalised, among the top-k
     * most likely when {@code --top-k} is set.
     */
    private int pick(double[] probabilities, Random rnd) {
        double[] p = probabilities.clone();
        if (topK > 0 && topK < p.length) {
            double[] sorted = p.clone();
            java.util.Arrays.sort(sorted);
            double least = sorted[p.length - topK];
            for (int i = 0; i < p.length; i++) {
                p[i] = p[i] >= least ? p[i] : 0;
            }
        }
        if (temperature == 0) {
            int best = 0;
            for (int i = 1; i < p.length; i++) {
                if (p[i] > p[best]) {
                    best = i;
                }
            }
            return best;
        }
        double[] w = new double[p.length];
        double sum = 0;
        for (int i = 0; i < p.length; i++) {
            w[i] = Math.pow(Math.max(p[i], 0), 1 / temperature);
            sum += w[i];
        }
        double u = rnd.nextDouble() * sum;
        for (int i = 0; i < w.length; i++) {
            u -= w[i];
            if (u <= 0) {
                return i;
            }
        }
        return w.length - 1;
    }
}
