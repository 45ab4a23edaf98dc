package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The checkpoints Hugging Face transformers saved itself ({@code ../shared/fixtures/hf-tiny}: a Llama with GQA in
 * F32, a Qwen2 with q/k/v biases and tied embeddings in BF16 shards) load into attn4j's graph and give
 * transformers' float32 logits within 1e-4 of the largest, in float32 and in float64.
 */
class HfFixtureLogitsTest {

    /** The fixtures beside the project: {@code ../shared/fixtures/hf-tiny} from the repository root. */
    static Path fixtures() {
        return Path.of("..", "..", "shared", "fixtures", "hf-tiny").toAbsolutePath().normalize();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"llama-gqa-f32", "qwen2-bias-tied-bf16"})
    void logitsEqualTransformersWithinAPartInTenThousandOfTheLargest(String name) throws Exception {
        Path dir = fixtures().resolve(name);
        Assumptions.assumeTrue(Files.isDirectory(dir), "no fixture at " + dir);
        INDArray tokens = Nd4j.createFromNpyFile(new File(dir.resolve("tokens.npy").toString()));
        INDArray expected = Nd4j.createFromNpyFile(new File(dir.resolve("logits.npy").toString()))
                .castTo(DataType.DOUBLE);
        for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE}) {
            HfDecoder model = HfDecoder.load(dir.resolve("model"), type);
            INDArray logits = model.logits(tokens).castTo(DataType.DOUBLE);
            assertArrayEquals(expected.shape(), logits.shape(), name + " " + type);
            double largest = expected.amaxNumber().doubleValue();
            double error = logits.sub(expected).amaxNumber().doubleValue() / largest;
            assertTrue(error <= 1e-4, name + " in " + type + ": largest difference " + error
                    + " of the largest logit " + largest);
        }
    }
}
