package org.attn4j.samples.train;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;
import java.util.concurrent.Callable;

import org.attn4j.samples.UserInputException;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.util.ModelSerializer;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j generate}: continues a prompt with a text model that {@code attn4j train --text FILE} wrote,
 * one byte at a time, sampling each next byte from the model's softmax at a temperature (0: the most likely).
 * The model sees at most its training sequence length of the latest bytes.
 */
@Command(name = "generate", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Continue a prompt with a text model trained by attn4j train --text.")
public final class GenerateCommand implements Callable<Integer> {

    @Option(names = "--checkpoint", paramLabel = "DIR", required = true,
            description = "The --out directory of attn4j train (model.zip and summary.json).")
    Path checkpoint;

    @Option(names = "--prompt", paramLabel = "TEXT", required = true, description = "The text to continue.")
    String prompt;

    @Option(names = "--length", paramLabel = "BYTES", defaultValue = "200",
            description = "Bytes to generate (default: ${DEFAULT-VALUE}).")
    int length;

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
        if (length < 1 || !(temperature >= 0)) {
            throw new UserInputException("--length must be >= 1 and --temperature >= 0, got " + length + ", "
                    + temperature);
        }
        byte[] start = prompt.getBytes(StandardCharsets.UTF_8);
        if (start.length == 0) {
            throw new UserInputException("--prompt is empty");
        }
        int window = summary.path("seq_len").asInt();
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        ComputationGraph net = ModelSerializer.restoreComputationGraph(modelFile.toFile(), false);
        byte[] text = new byte[start.length + length];
        System.arraycopy(start, 0, text, 0, start.length);
        Random rnd = new Random(seed);
        for (int i = start.length; i < text.length; i++) {
            int from = Math.max(0, i - window);
            INDArray in = Nd4j.zeros(DataType.FLOAT, 1, 1, i - from);
            for (int t = from; t < i; t++) {
                in.putScalar(new int[] {0, 0, t - from}, text[t] & 0xff);
            }
            INDArray p = net.outputSingle(in);
            double[] last = p.get(org.nd4j.linalg.indexing.NDArrayIndex.point(0),
                    org.nd4j.linalg.indexing.NDArrayIndex.all(),
                    org.nd4j.linalg.indexing.NDArrayIndex.point(i - from - 1)).castTo(DataType.DOUBLE)
                    .toDoubleVector();
            text[i] = (byte) pick(last, rnd);
        }
        PrintWriter o = spec.commandLine().getOut();
        o.println(new String(text, StandardCharsets.UTF_8));
        o.flush();
        return 0;
    }

    /** A byte from the distribution at the temperature: the argmax at 0, else p^(1/T), renormalised. */
    private int pick(double[] p, Random rnd) {
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
