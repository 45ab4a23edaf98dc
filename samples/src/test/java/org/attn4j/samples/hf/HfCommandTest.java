package org.attn4j.samples.hf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;

import org.attn4j.samples.CliRun;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * {@code attn4j hf} on the checkpoints and tokenizer Hugging Face's libraries made ({@code ../shared/fixtures}):
 * {@code logits} writes transformers' logits within 1e-4 of the largest, {@code generate} at temperature 0 writes
 * the tokens transformers' greedy {@code generate} chose, {@code tokenize} prints the tokenizer's ids; bad input
 * is one line.
 */
class HfCommandTest {

    @TempDir
    Path tmp;

    private static Path fixtures() {
        Path p = Path.of("..", "..", "shared", "fixtures").toAbsolutePath().normalize();
        Assumptions.assumeTrue(Files.isDirectory(p), "no fixtures at " + p);
        return p;
    }

    private static INDArray npy(Path p) {
        return Nd4j.createFromNpyFile(new File(p.toString()));
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-gqa-f32", "qwen2-bias-tied-bf16"})
    void logitsAndGreedyTokensEqualTransformers(String name) {
        Path dir = fixtures().resolve("hf-tiny").resolve(name);
        CliRun logits = CliRun.of("hf", "logits", "--model", dir.resolve("model").toString(), "--tokens",
                dir.resolve("tokens.npy").toString(), "--out", tmp.resolve("logits").toString());
        assertEquals(0, logits.exitCode(), logits.err());
        INDArray expected = npy(dir.resolve("logits.npy")).castTo(DataType.DOUBLE);
        INDArray got = npy(tmp.resolve("logits").resolve("logits.npy")).castTo(DataType.DOUBLE);
        assertArrayEquals(expected.shape(), got.shape());
        double error = got.sub(expected).amaxNumber().doubleValue() / expected.amaxNumber().doubleValue();
        assertTrue(error <= 1e-4, name + ": " + error + " of the largest logit");

        INDArray greedy = npy(dir.resolve("greedy.npy"));
        CliRun generate = CliRun.of("hf", "generate", "--model", dir.resolve("model").toString(), "--prompt-tokens",
                dir.resolve("prompt.npy").toString(), "--max-new-tokens", Long.toString(greedy.size(1)),
                "--temperature", "0", "--out", tmp.resolve("gen").toString());
        assertEquals(0, generate.exitCode(), generate.err());
        assertArrayEquals(greedy.toLongVector(), npy(tmp.resolve("gen").resolve("generated.npy")).toLongVector(),
                name + ": greedy tokens");
    }

    @Test
    void logitsOverTwoWorkersEqualTransformers() {
        Path dir = fixtures().resolve("hf-tiny").resolve("qwen2-bias-tied-bf16");
        CliRun r = CliRun.of("hf", "logits", "--model", dir.resolve("model").toString(), "--tokens",
                dir.resolve("tokens.npy").toString(), "--workers", "2", "--strategy", "zigzag", "--out",
                tmp.resolve("sp").toString());
        assertEquals(0, r.exitCode(), r.err() + r.out());
        INDArray expected = npy(dir.resolve("logits.npy")).castTo(DataType.DOUBLE);
        INDArray got = npy(tmp.resolve("sp").resolve("logits.npy")).castTo(DataType.DOUBLE);
        assertArrayEquals(expected.shape(), got.shape());
        double error = got.sub(expected).amaxNumber().doubleValue() / expected.amaxNumber().doubleValue();
        assertTrue(error <= 1e-4, "two workers, zigzag: " + error + " of the largest logit");

        CliRun uneven = CliRun.of("hf", "logits", "--model", dir.resolve("model").toString(), "--tokens",
                dir.resolve("tokens.npy").toString(), "--workers", "3", "--out", tmp.resolve("three").toString());
        assertEquals(1, uneven.exitCode());
        assertEquals(1, uneven.errLines().length, uneven.err());
        assertTrue(uneven.err().contains("N = 40 must be a positive multiple of 3"), uneven.err());
        CliRun linear = CliRun.of("hf", "logits", "--model", dir.resolve("model").toString(), "--tokens",
                dir.resolve("tokens.npy").toString(), "--workers", "2", "--strategy", "lasp", "--out",
                tmp.resolve("lasp").toString());
        assertEquals(1, linear.exitCode());
        assertTrue(linear.err().contains("linear-attention algorithm"), linear.err());
    }

    @Test
    void tokenizePrintsTheIdsOfTheTokenizer() throws Exception {
        Path dir = fixtures().resolve("tokenizer-bpe");
        JsonNode first = new ObjectMapper().readTree(Files.readString(dir.resolve("cases.json"))).get(0);
        CliRun r = CliRun.of("hf", "tokenize", "--model", dir.toString(), "--text", first.get("text").asText());
        assertEquals(0, r.exitCode(), r.err());
        StringBuilder ids = new StringBuilder();
        for (JsonNode id : first.get("ids")) {
            ids.append(ids.length() == 0 ? "" : " ").append(id.asLong());
        }
        assertEquals(ids.toString(), r.out().strip());
    }

    @Test
    void badInputIsOneLine() throws Exception {
        Path model = fixtures().resolve("hf-tiny").resolve("llama-gqa-f32").resolve("model");
        CliRun missing = CliRun.of("hf", "logits", "--model", model.toString(), "--tokens",
                tmp.resolve("none.npy").toString(), "--out", tmp.toString());
        assertEquals(1, missing.exitCode());
        assertEquals(1, missing.errLines().length, missing.err());
        assertTrue(missing.err().contains("none.npy: no such file"), missing.err());
        Path floats = tmp.resolve("floats.npy");
        Nd4j.writeAsNumpy(Nd4j.zeros(DataType.FLOAT, 1, 4), new File(floats.toString()));
        CliRun wrongType = CliRun.of("hf", "logits", "--model", model.toString(), "--tokens", floats.toString(),
                "--out", tmp.toString());
        assertEquals(1, wrongType.exitCode());
        assertTrue(wrongType.err().contains("expected integer token ids"), wrongType.err());
        CliRun noModel = CliRun.of("hf", "generate", "--model", tmp.toString(), "--prompt-tokens",
                fixtures().resolve("hf-tiny").resolve("llama-gqa-f32").resolve("prompt.npy").toString(),
                "--max-new-tokens", "2");
        assertEquals(1, noModel.exitCode());
        assertEquals(1, noModel.errLines().length, noModel.err());
        assertTrue(noModel.err().contains("no config.json"), noModel.err());
    }
}
