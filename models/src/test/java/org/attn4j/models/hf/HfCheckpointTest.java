package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Saving writes Hugging Face's layout (config.json and safetensors, sharded above a size) that loads back bit for
 * bit; bad files fail in one line naming the file and the tensor or key, and nothing half-loaded comes back.
 */
class HfCheckpointTest {

    @TempDir
    Path tmp;

    private Path llama;

    @BeforeEach
    void fixture() {
        llama = HfFixtureLogitsTest.fixtures().resolve("llama-gqa-f32").resolve("model");
        Assumptions.assumeTrue(Files.isDirectory(llama), "no fixture at " + llama);
    }

    @Test
    void savedModelsLoadBackBitForBitWholeAndSharded() throws Exception {
        for (String name : new String[] {"llama-gqa-f32", "qwen2-bias-tied-bf16"}) {
            HfDecoder model = HfDecoder.load(llama.getParent().resolveSibling(name).resolve("model"), DataType.FLOAT);
            Path whole = tmp.resolve(name + "-whole");
            model.save(whole, "F32", Long.MAX_VALUE);
            assertTrue(Files.isRegularFile(whole.resolve("model.safetensors")), "one file");
            assertEquals(model.graph().params(), HfDecoder.load(whole, DataType.FLOAT).graph().params(), name);
            Path sharded = tmp.resolve(name + "-sharded");
            model.save(sharded, "F32", 40_000);
            try (Stream<Path> files = Files.list(sharded)) {
                assertTrue(files.filter(p -> p.getFileName().toString().matches("model-\\d{5}-of-\\d{5}"
                        + "\\.safetensors")).count() > 1, "shards above 40 kB");
            }
            assertEquals(model.graph().params(), HfDecoder.load(sharded, DataType.FLOAT).graph().params(),
                    name + " sharded");
        }
        HfDecoder bf16 = HfDecoder.load(llama.getParent().resolveSibling("qwen2-bias-tied-bf16").resolve("model"),
                DataType.FLOAT);
        bf16.save(tmp.resolve("bf16"), "BF16", Long.MAX_VALUE);
        assertEquals(bf16.graph().params(), HfDecoder.load(tmp.resolve("bf16"), DataType.FLOAT).graph().params(),
                "BF16 weights written as BF16 come back exactly");
    }

    /** A copy of the Llama fixture whose model.safetensors is {@code bytes}. */
    private Path withWeights(byte[] bytes) throws IOException {
        Path dir = Files.createTempDirectory(tmp, "bad");
        Files.copy(llama.resolve("config.json"), dir.resolve("config.json"));
        Files.write(dir.resolve("model.safetensors"), bytes);
        return dir;
    }

    private Path withConfig(String from, String to) throws IOException {
        Path dir = Files.createTempDirectory(tmp, "config");
        Files.writeString(dir.resolve("config.json"), Files.readString(llama.resolve("config.json")).replace(from, to));
        Files.copy(llama.resolve("model.safetensors"), dir.resolve("model.safetensors"));
        return dir;
    }

    private static String refused(Path dir) {
        return assertThrows(IllegalArgumentException.class, () -> HfDecoder.load(dir, DataType.FLOAT)).getMessage();
    }

    private static void assertNames(String message, String... parts) {
        assertTrue(message.lines().count() == 1, "one line: " + message);
        for (String p : parts) {
            assertTrue(message.contains(p), "'" + p + "' in: " + message);
        }
    }

    @Test
    void aTruncatedFileIsNamed() throws Exception {
        byte[] whole = Files.readAllBytes(llama.resolve("model.safetensors"));
        Path dir = withWeights(java.util.Arrays.copyOf(whole, whole.length - 100));
        assertNames(refused(dir), "model.safetensors", "run outside");
        assertNames(refused(withWeights(java.util.Arrays.copyOf(whole, 5))), "model.safetensors", "5 bytes");
    }

    /** A file of two F32 tensors with the header given. */
    private static byte[] file(String header, int dataBytes) {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + h.length + dataBytes).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(h.length).put(h);
        return b.array();
    }

    @Test
    void overlappingOrOverrunningOffsetsAndWrongSizesAreNamed() throws Exception {
        Path overlap = withWeights(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12));
        assertNames(refused(overlap), "model.safetensors", "a [0, 8)", "b [4, 12)", "overlap");
        Path past = withWeights(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8));
        assertNames(refused(past), "tensor a", "[0, 16]", "8 data bytes");
        Path size = withWeights(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8));
        assertNames(refused(size), "tensor a", "needs 12 bytes", "hold 8");
        Path dtype = withWeights(file("{\"a\":{\"dtype\":\"I8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8));
        assertNames(refused(dtype), "tensor a", "dtype I8 is not supported");
    }

    @Test
    void missingUnexpectedAndMisshapenTensorsAreNamed() throws Exception {
        Safetensors s = Safetensors.open(llama.resolve("model.safetensors"));
        Map<String, INDArray> all = new LinkedHashMap<>();
        for (String name : s.entries().keySet()) {
            all.put(name, s.read(name, DataType.FLOAT));
        }
        Map<String, INDArray> missing = new LinkedHashMap<>(all);
        missing.remove("model.layers.1.mlp.up_proj.weight");
        assertNames(refused(rewritten(missing)), "model.layers.1.mlp.up_proj.weight is missing");
        Map<String, INDArray> extra = new LinkedHashMap<>(all);
        extra.put("model.layers.2.mlp.up_proj.weight", Nd4j.zeros(DataType.FLOAT, 2, 2));
        assertNames(refused(rewritten(extra)), "unexpected tensors", "model.layers.2.mlp.up_proj.weight");
        Map<String, INDArray> misshapen = new LinkedHashMap<>(all);
        misshapen.put("model.norm.weight", Nd4j.zeros(DataType.FLOAT, 47));
        assertNames(refused(rewritten(misshapen)), "model.safetensors", "model.norm.weight", "[47]", "[48]");
    }

    private Path rewritten(Map<String, INDArray> tensors) throws IOException {
        Path dir = Files.createTempDirectory(tmp, "tensors");
        Files.copy(llama.resolve("config.json"), dir.resolve("config.json"));
        Safetensors.write(dir.resolve("model.safetensors"), tensors, "F32", Map.of());
        return dir;
    }

    @Test
    void unknownModelTypesAndRopeTypesAreNamed() throws Exception {
        assertNames(refused(withConfig("\"model_type\": \"llama\"", "\"model_type\": \"gpt2\"")), "config.json",
                "model_type gpt2 is not supported");
        assertNames(refused(withConfig("\"rope_type\": \"default\"", "\"rope_type\": \"longrope\", \"factor\": 2")),
                "config.json", "got longrope");
    }

    @Test
    void bothConfigLayoutsGiveTheSameRotation() throws Exception {
        HfConfig v5 = HfConfig.read(llama);
        Path v4 = withConfig("\"rope_parameters\": {\n    \"rope_theta\": 10000.0,\n    \"rope_type\": \"default\"\n  }",
                "\"rope_theta\": 10000.0, \"rope_scaling\": null");
        assertEquals(v5.rope(), HfConfig.read(v4).rope());
        Path yarn4 = withConfig("\"rope_parameters\": {\n    \"rope_theta\": 10000.0,\n    \"rope_type\": \"default\"\n"
                + "  }", "\"rope_theta\": 500.0, \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0, "
                + "\"original_max_position_embeddings\": 128}");
        Path yarn5 = withConfig("\"rope_parameters\": {\n    \"rope_theta\": 10000.0,\n    \"rope_type\": \"default\"\n"
                + "  }", "\"rope_parameters\": {\"rope_theta\": 500.0, \"rope_type\": \"yarn\", \"factor\": 4.0, "
                + "\"original_max_position_embeddings\": 128}");
        assertEquals(HfConfig.read(yarn4).rope(), HfConfig.read(yarn5).rope());
        assertEquals(org.attn4j.ops.rope.RotaryEmbedding.Scaling.YARN, HfConfig.read(yarn5).rope().getScaling());
    }
}
