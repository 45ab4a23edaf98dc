package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * {@link HfDecoder#step}, which computes a decoding step outside DL4J's layers ({@link TokenStep}), gives the
 * distribution of the whole sequence's forward pass at every step: Llama with GQA and partial linear-scaled RoPE,
 * Qwen2 with q/k/v biases and tied embeddings, and Mistral with a sliding window shorter than the sequence (its
 * cache drops keys), in float64 to 1e-10 and float32 to 1e-5; and a step through {@code rnnTimeStep} between its
 * own leaves the caches as it needs them.
 */
class TokenStepTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    static HfConfig config(String type, int window) {
        ObjectNode c = JSON.createObjectNode();
        c.put("model_type", type).put("vocab_size", 37).put("hidden_size", 48).put("intermediate_size", 80)
                .put("num_hidden_layers", 2).put("num_attention_heads", 6).put("num_key_value_heads", 2)
                .put("head_dim", 16).put("max_position_embeddings", 64).put("rms_norm_eps", 1e-5)
                .put("rope_theta", 500.0);
        if (type.equals("llama")) {
            c.put("partial_rotary_factor", 0.5);
            c.putObject("rope_scaling").put("rope_type", "linear").put("factor", 2.0);
        }
        if (window > 0) {
            c.put("sliding_window", window);
        }
        if (type.equals("qwen2")) {
            c.put("tie_word_embeddings", true);
        }
        return HfConfig.of(type, c);
    }

    @ParameterizedTest(name = "{0}, window {1}, {2}")
    @CsvSource({"llama, 0, DOUBLE", "qwen2, 0, DOUBLE", "mistral, 5, DOUBLE", "llama, 0, FLOAT", "mistral, 5, FLOAT"})
    void stepsEqualTheWholeSequencesForwardPass(String type, int window, DataType dtype) {
        HfConfig c = config(type, window);
        HfDecoder model = HfDecoder.random(c, dtype, 7);
        Random rnd = new Random(3);
        long[] tokens = new long[15];
        for (int i = 0; i < tokens.length; i++) {
            tokens[i] = rnd.nextInt(c.vocab());
        }
        int prompt = 6;
        INDArray logits = model.logits(Nd4j.createFromArray(tokens).reshape(1, tokens.length))
                .castTo(DataType.DOUBLE);                                  // [1, N, V]
        double tolerance = dtype == DataType.DOUBLE ? 1e-10 : 1e-5;
        model.prefill(java.util.Arrays.copyOf(tokens, prompt), tokens.length - prompt);
        for (int t = prompt; t < tokens.length; t++) {
            INDArray p;
            if (t == prompt + 3) {                 // one step through the layers, then on with TokenStep
                INDArray in = Nd4j.scalar(dtype, tokens[t]).reshape(1, 1, 1);
                INDArray out = model.graph().rnnTimeStep(in)[0];
                p = out.get(NDArrayIndex.point(0), NDArrayIndex.all(), NDArrayIndex.point(0));
            } else {
                p = model.step(tokens[t]);
            }
            INDArray expected = softmax(logits.get(NDArrayIndex.point(0), NDArrayIndex.point(t), NDArrayIndex.all()));
            assertEquals(c.vocab(), p.length());
            double error = p.castTo(DataType.DOUBLE).reshape(expected.shape()).sub(expected).amaxNumber()
                    .doubleValue();
            assertTrue(error <= tolerance, type + " " + dtype + ": step at position " + t + " differs from the "
                    + "whole pass by " + error);
        }
    }

    private static INDArray softmax(INDArray z) {
        double[] v = z.toDoubleVector();
        double max = java.util.Arrays.stream(v).max().orElseThrow();
        double sum = 0;
        for (int i = 0; i < v.length; i++) {
            v[i] = Math.exp(v[i] - max);
            sum += v[i];
        }
        for (int i = 0; i < v.length; i++) {
            v[i] /= sum;
        }
        return Nd4j.createFromArray(v);
    }
}
