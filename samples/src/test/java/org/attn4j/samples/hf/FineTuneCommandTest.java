package org.attn4j.samples.hf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.models.hf.HfConfig;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.CliRun;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * {@code attn4j hf finetune} on a small random Llama whose vocabulary covers the BPE tokenizer of the fixtures
 * (made by Hugging Face's tokenizers library): the run prints a loss per step, leaves the summary, the loss curve and
 * the model in Hugging Face's layout with its tokenizer; two worker processes (ring, ZeRO 2) in float64 print one
 * process's losses and save its weights; bad input is one line.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class FineTuneCommandTest {

    private static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    static Path shared;

    static Path model;
    static Path text;

    @BeforeAll
    static void fixture() throws IOException {
        ObjectNode c = JSON.createObjectNode();
        c.put("model_type", "llama").put("vocab_size", 322).put("hidden_size", 32).put("intermediate_size", 48)
                .put("num_hidden_layers", 2).put("num_attention_heads", 4).put("num_key_value_heads", 2)
                .put("max_position_embeddings", 64).put("rms_norm_eps", 1e-5).put("rope_theta", 10000.0)
                .put("dtype", "float32");
        model = shared.resolve("model");
        HfDecoder.random(HfConfig.of("test", c), DataType.FLOAT, 3).save(model, "F32", 1L << 30);
        Files.copy(Path.of("../../shared/fixtures/tokenizer-bpe/tokenizer.json"), model.resolve("tokenizer.json"));
        StringBuilder b = new StringBuilder();
        String[] words = {"the", "cat", "sat", "on", "a", "mat", "and", "looked", "at", "dog", "who", "ran", "away"};
        java.util.Random rnd = new java.util.Random(4);
        for (int i = 0; i < 600; i++) {
            b.append(words[rnd.nextInt(words.length)]).append(i % 12 == 11 ? ".\n" : " ");
        }
        text = shared.resolve("text.txt");
        Files.writeString(text, b);
    }

    private static List<Double> losses(String out) {
        List<Double> l = new ArrayList<>();
        for (String line : out.split("\\R")) {
            if (line.startsWith("step ")) {
                String[] f = line.split(" ");
                assertEquals(l.size(), Integer.parseInt(f[1]), line);
                l.add(Double.parseDouble(f[3]));
            }
        }
        return l;
    }

    /** The command with {@code more} flags, and the test's defaults for every flag {@code more} does not give. */
    private static String[] args(Path out, String... more) {
        List<String> a = new ArrayList<>(List.of("hf", "finetune"));
        a.addAll(List.of(more));
        String[][] defaults = {{"--model", model.toString()}, {"--text", text.toString()}, {"--seq-len", "32"},
            {"--batch", "2"}, {"--steps", "4"}, {"--lr", "1e-3"}, {"--warmup", "1"}, {"--clip", "0.5"},
            {"--checkpoint-every", "2"}, {"--out", out.toString()}};
        for (String[] d : defaults) {
            if (!a.contains(d[0])) {
                a.addAll(List.of(d));
            }
        }
        return a.toArray(new String[0]);
    }

    @Test
    void twoWorkersPrintOneProcesssLossesAndSaveItsModel(@TempDir Path dir) throws Exception {
        CliRun one = CliRun.of(args(dir.resolve("one"), "--dtype", "float64"));
        assertEquals(0, one.exitCode(), one.err() + one.out());
        List<Double> expected = losses(one.out());
        assertEquals(4, expected.size(), one.out());
        assertTrue(expected.get(3) < expected.get(0), "the loss falls: " + expected);

        Path o = dir.resolve("one");
        JsonNode summary = JSON.readTree(o.resolve("summary.json").toFile());
        assertEquals("completed", summary.get("status").asText());
        assertEquals(4, summary.get("steps_done").asInt());
        assertEquals(4, summary.get("checkpoint_step").asInt());
        assertEquals(expected.get(0), summary.get("first_loss").asDouble());
        assertEquals(expected.get(3), summary.get("final_loss").asDouble());
        assertTrue(summary.get("tokens_per_second").asDouble() > 0 && summary.get("peak_bytes").asLong() > 0,
                summary.toString());
        assertTrue(Files.size(o.resolve("loss.png")) > 0);
        assertEquals(Files.readString(model.resolve("tokenizer.json")),
                Files.readString(o.resolve("model/tokenizer.json")), "the tokenizer goes with the model");
        HfDecoder saved = HfDecoder.load(o.resolve("model"), DataType.FLOAT);
        INDArray original = HfDecoder.load(model, DataType.FLOAT).graph().params();
        assertTrue(saved.graph().params().sub(original).norm2Number().doubleValue() > 0, "the saved model trained");

        // the workers recompute each block in the backward pass: the same losses
        CliRun two = CliRun.of(args(dir.resolve("two"), "--dtype", "float64", "--workers", "2", "--zero", "2",
                "--activation-checkpointing"));
        assertEquals(0, two.exitCode(), two.err() + two.out());
        List<Double> got = losses(two.out());
        assertEquals(expected.size(), got.size(), two.out());
        for (int s = 0; s < got.size(); s++) {
            assertEquals(expected.get(s), got.get(s), 1e-9 * expected.get(s), "step " + s);
        }
        JsonNode twoSummary = JSON.readTree(dir.resolve("two/summary.json").toFile());
        assertEquals(2, twoSummary.get("workers").asInt());
        assertTrue(twoSummary.get("activation_checkpointing").asBoolean(), twoSummary.toString());
        assertEquals("completed", twoSummary.get("status").asText());
        INDArray twoParams = HfDecoder.load(dir.resolve("two/model"), DataType.FLOAT).graph().params();
        double diff = twoParams.sub(saved.graph().params()).norm2Number().doubleValue();
        assertTrue(diff <= 1e-6 * saved.graph().params().norm2Number().doubleValue(), "saved weights differ by "
                + diff);
    }

    /** Each printed step's loss, by step. */
    private static Map<Integer, Double> stepLosses(String out) {
        Map<Integer, Double> l = new TreeMap<>();
        for (String line : out.split("\\R")) {
            if (line.startsWith("step ")) {
                String[] f = line.split(" ");
                l.put(Integer.parseInt(f[1]), Double.parseDouble(f[3]));
            }
        }
        return l;
    }

    /**
     * A run killed (SIGKILL) once it has printed its second step resumes from its newest complete checkpoint
     * (weights, Adam's state and the schedule's step; one every 3 of 30 steps) and prints the uninterrupted run's
     * losses from there on, in float64 to 1e-12.
     */
    @Test
    void aKilledRunResumesToTheLossesOfTheUninterruptedRun(@TempDir Path dir) throws Exception {
        List<String> common = List.of("--steps", "30", "--checkpoint-every", "3", "--dtype", "float64", "--warmup", "2");
        List<String> whole = new ArrayList<>(common);
        whole.addAll(List.of("--checkpoint-dir", dir.resolve("ck-whole").toString()));
        CliRun uninterrupted = CliRun.of(args(dir.resolve("whole"), whole.toArray(new String[0])));
        assertEquals(0, uninterrupted.exitCode(), uninterrupted.err() + uninterrupted.out());
        Map<Integer, Double> expected = stepLosses(uninterrupted.out());
        assertEquals(30, expected.size(), uninterrupted.out());

        List<String> run = new ArrayList<>(common);
        run.addAll(List.of("--checkpoint-dir", dir.resolve("ck").toString()));
        List<String> out = new CopyOnWriteArrayList<>();
        AtomicBoolean killed = new AtomicBoolean();
        Consumer<String> watch = line -> {
            out.add(line);
            if (line.contains("step 1 loss") && killed.compareAndSet(false, true)) {
                // the only Java process this test JVM has started now (a command line longer than 4 KB, as a
                // worker's class path makes it, is cut off in what ProcessHandle reports)
                ProcessHandle.current().descendants().filter(p -> p.info().command().orElse("").endsWith("java"))
                        .forEach(ProcessHandle::destroyForcibly);
            }
        };
        LaunchResult r = LocalLauncher.builder(1, Attn4jCli.class.getName())
                .args(List.of(args(dir.resolve("run"), run.toArray(new String[0])))).heap("1g")
                .timeout(Duration.ofMinutes(3)).output(watch, watch).build().run();
        assertTrue(killed.get(), String.join("\n", out));
        assertEquals(137, r.exitCodes()[0], "SIGKILLed\n" + String.join("\n", out));

        run.add("--resume");
        CliRun resumed = CliRun.of(args(dir.resolve("run"), run.toArray(new String[0])));
        assertEquals(0, resumed.exitCode(), resumed.err() + resumed.out());
        Map<Integer, Double> after = stepLosses(resumed.out());
        int from = after.keySet().iterator().next();
        assertTrue(from % 3 == 0 && from < 30, "resumes from a checkpoint (every 3 steps): " + after);
        assertEquals(30 - from, after.size(), resumed.out());
        for (Map.Entry<Integer, Double> e : after.entrySet()) {
            assertEquals(expected.get(e.getKey()), e.getValue(), 1e-12 * expected.get(e.getKey()),
                    "step " + e.getKey());
        }
        JsonNode summary = JSON.readTree(dir.resolve("run/summary.json").toFile());
        assertEquals("completed", summary.get("status").asText(), summary.toString());
        assertEquals(30, summary.get("steps_done").asInt(), summary.toString());
    }

    /**
     * Packed documents (blank lines between them) with positions restarting at each: two workers (Ulysses, ZeRO 3)
     * print one process's losses; the summary says how the run packed.
     */
    @Test
    void packedDocumentsTrainTheSameOnOneProcessAndOnTwoWorkers(@TempDir Path dir) throws Exception {
        StringBuilder b = new StringBuilder();
        String[] words = {"the", "cat", "sat", "on", "a", "mat", "and", "looked", "at", "dog", "who", "ran", "away"};
        java.util.Random rnd = new java.util.Random(5);
        for (int d = 0; d < 40; d++) {
            int length = 3 + rnd.nextInt(20);
            for (int i = 0; i < length; i++) {
                b.append(words[rnd.nextInt(words.length)]).append(' ');
            }
            b.append("\n\n");
        }
        Path docs = dir.resolve("docs.txt");
        Files.writeString(docs, b);
        String[] packed = {"--text", docs.toString(), "--pack", "--restart-positions", "--dtype", "float64"};
        CliRun one = CliRun.of(args(dir.resolve("one"), packed));
        assertEquals(0, one.exitCode(), one.err() + one.out());
        List<Double> expected = losses(one.out());
        assertEquals(4, expected.size(), one.out());
        List<String> more = new ArrayList<>(List.of(packed));
        more.addAll(List.of("--workers", "2", "--strategy", "ulysses", "--zero", "3"));
        CliRun two = CliRun.of(args(dir.resolve("two"), more.toArray(new String[0])));
        assertEquals(0, two.exitCode(), two.err() + two.out());
        List<Double> got = losses(two.out());
        assertEquals(expected.size(), got.size(), two.out());
        for (int s = 0; s < got.size(); s++) {
            assertEquals(expected.get(s), got.get(s), 1e-9 * expected.get(s), "step " + s);
        }
        JsonNode summary = JSON.readTree(dir.resolve("one/summary.json").toFile());
        assertTrue(summary.get("pack").asBoolean() && summary.get("restart_positions").asBoolean(),
                summary.toString());
    }

    /**
     * Context extension: yarn scaling by 4 trains sequences of 128 tokens, twice the checkpoint's
     * max_position_embeddings of 64; two workers (zigzag, ZeRO 1) print one process's losses; the saved config.json
     * carries the scaling (transformers 4.x's rope_scaling, the layout of the checkpoint) and 256 positions, and
     * reads back to the rotary embedding that trained.
     */
    @Test
    void ropeScalingTrainsBeyondTheCheckpointsLengthAndIsSavedInItsConfig(@TempDir Path dir) throws Exception {
        String[] scaled = {"--rope-scaling", "yarn:4", "--seq-len", "128", "--batch", "1", "--steps", "3",
            "--dtype", "float64"};
        CliRun one = CliRun.of(args(dir.resolve("one"), scaled));
        assertEquals(0, one.exitCode(), one.err() + one.out());
        List<Double> expected = losses(one.out());
        assertEquals(3, expected.size(), one.out());
        List<String> more = new ArrayList<>(List.of(scaled));
        more.addAll(List.of("--workers", "2", "--strategy", "zigzag", "--zero", "1"));
        CliRun two = CliRun.of(args(dir.resolve("two"), more.toArray(new String[0])));
        assertEquals(0, two.exitCode(), two.err() + two.out());
        List<Double> got = losses(two.out());
        assertEquals(expected.size(), got.size(), two.out());
        for (int s = 0; s < got.size(); s++) {
            assertEquals(expected.get(s), got.get(s), 1e-9 * expected.get(s), "step " + s);
        }
        Path saved = dir.resolve("one/model");
        JsonNode config = JSON.readTree(saved.resolve("config.json").toFile());
        assertEquals(256, config.get("max_position_embeddings").asInt(), config.toString());
        JsonNode rope = config.get("rope_scaling");
        assertEquals("yarn", rope.get("rope_type").asText(), config.toString());
        assertEquals(4.0, rope.get("factor").asDouble(), config.toString());
        assertEquals(64, rope.get("original_max_position_embeddings").asInt(), config.toString());
        assertEquals(HfConfig.read(model).withRopeScaling(RotaryEmbedding.Scaling.YARN, 4).rope(),
                HfDecoder.load(saved, DataType.FLOAT).config().rope());
        JsonNode summary = JSON.readTree(dir.resolve("one/summary.json").toFile());
        assertEquals("yarn:4", summary.get("rope_scaling").asText());
        assertEquals(256, summary.get("max_position_embeddings").asInt());
    }

    @ParameterizedTest(name = "{1}")
    @CsvSource(delimiter = '|', value = {
        "--warmup 4|--warmup must be fewer than --steps, got 4 of 4",
        "--strategy lasp|is a linear-attention algorithm",
        "--seq-len 100000|needs at least 100000",
        "--save-dtype F16|--save-dtype must be F32 or BF16, got F16",
        "--workers 3|must be a positive multiple of",
        "--restart-positions|--restart-positions needs --pack",
        "--rope-scaling yarn|--rope-scaling must be TYPE:FACTOR with TYPE linear, dynamic, yarn or llama3",
        "--rope-scaling ntk:2|got ntk:2",
        "--rope-scaling linear:1.3|--rope-scaling linear:1.3: rope scaling factor 1.3 times max_position_embeddings 64"})
    void badInputIsOneLine(String flags, String expected, @TempDir Path dir) {
        CliRun r = CliRun.of(args(dir.resolve("out"), flags.split(" ")));
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode(), r.err());
        assertTrue(r.err().contains(expected), r.err());
        assertEquals(1, r.err().strip().split("\\R").length, r.err());
    }

    @Test
    void aModelWithoutATokenizerIsRefusedInOneLine(@TempDir Path dir) throws IOException {
        Path bare = dir.resolve("bare");
        Files.createDirectories(bare);
        for (String f : new String[] {"config.json", "model.safetensors"}) {
            Files.copy(model.resolve(f), bare.resolve(f));
        }
        CliRun r = CliRun.of(args(dir.resolve("out"), "--model", bare.toString()));
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode(), r.err());
        assertTrue(r.err().contains("no tokenizer.json"), r.err());
    }
}
