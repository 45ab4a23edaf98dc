package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;

import org.attn4j.ops.rope.RotaryEmbedding;
import org.attn4j.ops.rope.RotaryEmbedding.Scaling;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * Context extension ({@link HfConfig#withRopeScaling}): the scaled configuration in both config layouts, the rotary
 * embedding it reads back to, and a model loaded with it, saved and loaded again, giving the same logits beyond the
 * checkpoint's trained length (on the Llama fixture transformers saved, whose {@code max_position_embeddings} is 512).
 */
class HfRopeScalingTest {

    private static Path llama() {
        return HfFixtureLogitsTest.fixtures().resolve("llama-gqa-f32/model");
    }

    @ParameterizedTest
    @EnumSource(value = Scaling.class, names = {"LINEAR", "DYNAMIC", "YARN", "LLAMA3"})
    void theScaledConfigCarriesTheTypeTheFactorAndTheNewLengthInTheFileItsLayout(Scaling type) throws IOException {
        HfConfig base = HfConfig.read(llama());
        HfConfig scaled = base.withRopeScaling(type, 4);
        JsonNode p = scaled.json().get("rope_parameters");                   // transformers 5.x, as saved
        assertEquals(type.hfName(), p.get("rope_type").asText());
        assertEquals(4.0, p.get("factor").asDouble());
        assertEquals(10000.0, p.get("rope_theta").asDouble());
        assertFalse(scaled.json().has("rope_scaling"), scaled.json().toString());
        boolean keepsLength = type == Scaling.DYNAMIC;
        assertEquals(keepsLength ? 512 : 2048, scaled.maxPositions());
        boolean original = type == Scaling.YARN || type == Scaling.LLAMA3;
        assertEquals(original ? 512 : -1, p.path("original_max_position_embeddings").asInt(-1));

        RotaryEmbedding.Builder expected = RotaryEmbedding.builder().theta(10000).scaling(type, 4)
                .maxPositions(keepsLength ? 512 : 2048).originalMaxPositions(original || keepsLength ? 512 : 2048);
        assertEquals(expected.build(), scaled.rope(), "what transformers reads from it, attn4j reads too");
        assertEquals(Scaling.DEFAULT, base.rope().getScaling(), "the checkpoint's own config is unchanged");

        ObjectNode v4 = base.json().deepCopy();                               // transformers 4.x: rope_theta
        v4.remove("rope_parameters");
        v4.put("rope_theta", 10000.0);
        JsonNode s4 = HfConfig.of("4.x", v4).withRopeScaling(type, 4).json();
        assertEquals(type.hfName(), s4.get("rope_scaling").get("rope_type").asText());
        assertEquals(4.0, s4.get("rope_scaling").get("factor").asDouble());
        assertFalse(s4.has("rope_parameters"), s4.toString());
    }

    @Test
    void badScalingsAreRefusedInOneLine() throws IOException {
        HfConfig base = HfConfig.read(llama());
        String[][] cases = {
            {"DEFAULT", "4", "must be linear, dynamic, yarn or llama3, got default"},
            {"YARN", "1", "factor must be a number above 1, got 1.0"},
            {"LINEAR", "1.3", "times max_position_embeddings 512 is 665.6, not a whole number of positions"}};
        for (String[] c : cases) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> base.withRopeScaling(Scaling.valueOf(c[0]), Double.parseDouble(c[1])));
            assertTrue(e.getMessage().contains(c[2]) && !e.getMessage().contains("\n"), e.getMessage());
        }
        HfConfig yarn = base.withRopeScaling(Scaling.YARN, 2);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> yarn.withRopeScaling(Scaling.LINEAR, 2));
        assertTrue(e.getMessage().contains("already scales its rope (yarn, factor 2.0)"), e.getMessage());
    }

    /**
     * The fixture's weights in the network of a yarn-scaled config: at 600 positions (beyond the 512 it was trained
     * for) its logits differ from the unscaled model's, and the model saved and loaded again gives them exactly.
     */
    @Test
    void aScaledModelSavedAndLoadedAgainGivesTheSameLogitsBeyondTheTrainedLength(@TempDir Path dir)
            throws IOException {
        HfConfig yarn = HfConfig.read(llama()).withRopeScaling(Scaling.YARN, 4);
        HfDecoder scaled = HfDecoder.load(llama(), yarn, DataType.FLOAT);
        java.util.Random random = new java.util.Random(7);
        INDArray tokens = Nd4j.createFromArray(new long[][] {random.longs(600, 0, 83).toArray()});
        INDArray logits = scaled.logits(tokens);
        INDArray plain = HfDecoder.load(llama(), DataType.FLOAT).logits(tokens);
        assertTrue(logits.sub(plain).amaxNumber().doubleValue() > 1e-3, "the scaling changes the logits");

        scaled.save(dir, "F32", 1L << 30);
        HfDecoder again = HfDecoder.load(dir, DataType.FLOAT);
        assertEquals(yarn.rope(), again.config().rope());
        assertEquals(2048, again.config().maxPositions());
        assertEquals(0.0, again.logits(tokens).sub(logits).amaxNumber().doubleValue(), 0.0);
    }
}
