package org.attn4j.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import org.apache.spark.api.java.JavaSparkContext;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.models.hf.HfConfig;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.models.hf.HfFineTuner;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * A Hugging Face checkpoint fine-tuned in a Spark barrier stage of four tasks (ring attention over two, two
 * data-parallel groups, ZeRO 2; float64) takes the steps {@link HfFineTuner} takes on one process, and rank 0's saved
 * model holds that process's weights.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class SparkHfFineTunerTest {

    private static final int STEPS = 3;

    @TempDir
    Path tmp;

    /** The whole batch of a step: four seeded sequences of 16 tokens. */
    static long[][] sequences(int step) {
        Random rnd = new Random(500L + step);
        long[][] s = new long[4][16];
        for (long[] row : s) {
            for (int t = 0; t < row.length; t++) {
                row[t] = rnd.nextInt(40);
            }
        }
        return s;
    }

    @Test
    void fourTasksTakeOneProcesssStepsAndRankZeroSavesItsWeights() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        ObjectNode c = new ObjectMapper().createObjectNode();
        c.put("model_type", "llama").put("vocab_size", 40).put("hidden_size", 16).put("intermediate_size", 24)
                .put("num_hidden_layers", 2).put("num_attention_heads", 4).put("num_key_value_heads", 2)
                .put("max_position_embeddings", 64).put("rms_norm_eps", 1e-5).put("rope_theta", 10000.0)
                .put("dtype", "float32");
        Path model = tmp.resolve("model");
        HfDecoder.random(HfConfig.of("test", c), DataType.DOUBLE, 3).save(model, "F32", 1L << 30);

        HfDecoder single = HfDecoder.load(model, DataType.DOUBLE);
        HfFineTuner one = HfFineTuner.builder(single, InJvmTransport.group(1, Duration.ofSeconds(30)).get(0))
                .learningRate(1e-3).warmupSteps(1).steps(STEPS).clipGradientNorm(0.5).build();
        double[] expected = new double[STEPS];
        for (int s = 0; s < STEPS; s++) {
            expected[s] = one.step(HfFineTuner.batch(sequences(s), DataType.DOUBLE));
        }

        Path out = tmp.resolve("tuned");
        SparkHfFineTuner.Result r;
        try (JavaSparkContext sc = SparkSequenceParallelTest.spark("local[4]")) {
            r = SparkHfFineTuner.builder(model, ParallelStrategy.sequence("ring", 2).withDataParallel(2)
                            .withZero(ZeroStage.GRADIENTS))
                    .learningRate(1e-3).warmupSteps(1).steps(STEPS).clipGradientNorm(0.5).dataType(DataType.DOUBLE)
                    .output(out, "F32").timeout(Duration.ofSeconds(30)).build()
                    .fit(sc, SparkHfFineTunerTest::sequences);
        }
        for (int s = 0; s < STEPS; s++) {
            assertEquals(expected[s], r.losses()[s], 1e-9 * expected[s], "step " + s);
        }
        assertEquals(out, r.output());
        INDArray saved = HfDecoder.load(out, DataType.DOUBLE).graph().params();
        INDArray reference = single.graph().params();
        double diff = saved.sub(reference).norm2Number().doubleValue();
        assertTrue(diff <= 1e-6 * reference.norm2Number().doubleValue(), "saved weights differ by " + diff);
    }
}
