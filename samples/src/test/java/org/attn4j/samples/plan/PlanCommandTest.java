package org.attn4j.samples.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.CliRun;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/** {@code attn4j plan} in-process through {@link Attn4jCli#commandLine()}: its table, its JSON, its refusals. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PlanCommandTest {

    /** Every listed algorithm, in the list's order: the plan prices each. */
    private static final List<String> ALGORITHMS = SequenceAlgorithm.all().stream().map(SequenceAlgorithm::name)
            .toList();

    @TempDir
    Path tmp;

    @Test
    void printsOneRowPerAlgorithmAndNamesTheFastest() {
        CliRun run = CliRun.of("plan", "--cluster", "a100-16", "--model", "gpt3-2.7b", "-N", "8k", "--causal");
        assertEquals(0, run.exitCode(), run.err());
        String out = run.out();
        assertTrue(out.contains("cluster a100-16, 4 nodes x 4 workers, P = 16"), out);
        assertTrue(out.contains("ATTENTION2D section 4.1"), out);
        assertTrue(out.contains("B 32, H 32, Hkv 32, D 80, 2 bytes per element, 32 layers; softmax attention, causal"),
                out);
        assertTrue(out.contains("N = 8192 (N/P = 512)"), out);
        for (String a : ALGORITHMS) {
            assertTrue(out.lines().anyMatch(l -> l.startsWith(a + " ")), a + " missing:\n" + out);
        }
        assertTrue(out.lines().anyMatch(l -> l.startsWith("ring ") && l.endsWith("1.00x")), out);
        assertTrue(out.contains("lasp                 n/a: linear attention; plan it with --attention linear"), out);
        Matcher fastest = Pattern.compile("fastest: (\\S+) \\(").matcher(out);
        assertTrue(fastest.find(), out);
        assertTrue(ALGORITHMS.contains(fastest.group(1)), fastest.group(1));
    }

    @Test
    void writesTheSamePredictionsAsJson() throws Exception {
        Path json = tmp.resolve("sub/plan.json");
        CliRun run = CliRun.of("plan", "--cluster", "a100-16", "--model", "gpt3-2.7b", "-N", "8k,16k", "--causal",
                "--layers", "1", "--json", json.toString());
        assertEquals(0, run.exitCode(), run.err());
        JsonNode root = new ObjectMapper().readTree(json.toFile());
        assertEquals("a100-16", root.get("cluster").get("preset").asText());
        assertEquals(16, root.get("cluster").get("workers").asInt());
        assertEquals(150.0, root.get("rate_tflops").asDouble());
        JsonNode plans = root.get("plans");
        assertEquals(2, plans.size());
        assertEquals(8192, plans.get(0).get("seq_len").asLong());
        assertEquals(16384, plans.get(1).get("seq_len").asLong());
        assertTrue(run.out().contains("fastest: " + plans.get(0).get("fastest").asText() + " ("), run.out());
        JsonNode predictions = plans.get(0).get("predictions");
        List<String> names = new ArrayList<>();
        predictions.forEach(p -> names.add(p.get("algorithm").asText()));
        assertEquals(ALGORITHMS, names);
        JsonNode ring = predictions.get(0);
        // B 32, H = Hkv 32, N/P 512, D 80, 2 bytes: X_q = X_kv = 83886080 bytes, X_lse = 1048576; one layer
        SequenceAlgorithm.Volume volume = SequenceAlgorithm.byName("ring").volume(
                SequenceAlgorithm.Settings.of(16, 8192, true), new SequenceAlgorithm.ShardBytes(
                        32L * 32 * 512 * 80 * 2, 32L * 32 * 512 * 80 * 2, 32L * 32 * 512 * 2, 0), 0);
        assertEquals(volume.forward(), ring.get("forward_bytes").asLong());
        assertEquals(volume.backward(), ring.get("backward_bytes").asLong());
        assertEquals("P=16, bwd: queries travel", ring.get("config").asText());
        assertEquals(1.0, ring.get("speedup_over_ring").asDouble());
        assertTrue(ring.get("total_seconds").asDouble() > ring.get("forward_seconds").asDouble());
        JsonNode wall = predictions.get(1);
        assertTrue(wall.get("alternatives").size() >= 2, "the scheduler's other team sizes are listed");
        assertFalse(predictions.get(ALGORITHMS.indexOf("lasp")).get("available").asBoolean(), "linear attention");
    }

    @Test
    void describesAClusterWithoutPresetAndSaysWhyUlyssesCannotRun() {
        CliRun ok = CliRun.of("plan", "--nodes", "2", "--workers-per-node", "2", "--intra-bw", "100", "--inter-bw",
                "10", "--rate", "5", "--heads", "8", "--kv-heads", "4", "--head-dim", "64", "-N", "4096");
        assertEquals(0, ok.exitCode(), ok.err());
        assertTrue(ok.out().contains("attn4j plan: 2 nodes x 2 workers, P = 4"), ok.out());
        assertTrue(ok.out().lines().anyMatch(l -> l.startsWith("ulysses ") && l.contains("2 heads per worker")),
                ok.out());
        CliRun eight = CliRun.of("plan", "--nodes", "2", "--workers-per-node", "4", "--intra-bw", "100",
                "--inter-bw", "10", "--rate", "5", "--heads", "8", "--kv-heads", "4", "--head-dim", "64", "-N", "4096");
        assertEquals(0, eight.exitCode(), eight.err());
        assertTrue(eight.out().contains("ulysses              n/a: P = 8 must divide H = 8 and Hkv = 4"), eight.out());
    }

    @Test
    void reportsAttn4jsDefaultGridAndListsTheTransposedOne() throws Exception {
        Path json = tmp.resolve("grid.json");
        CliRun run = CliRun.of("plan", "--nodes", "2", "--workers-per-node", "4", "--intra-bw", "100", "--inter-bw",
                "10", "--rate", "5", "--heads", "8", "--kv-heads", "4", "--head-dim", "64", "-N", "4096", "--json",
                json.toString());
        assertEquals(0, run.exitCode(), run.err());
        JsonNode predictions = new ObjectMapper().readTree(json.toFile()).get("plans").get(0).get("predictions");
        for (int i : new int[] {2, 3}) {                       // attention2d, attention2d-overlap
            JsonNode a2d = predictions.get(i);
            assertEquals("4 x 2 grid", a2d.get("config").asText(), "ProcessorGrid.forWorkers(8)");
            JsonNode other = a2d.get("alternatives").get(0);
            assertEquals("2 x 4 grid", other.get("config").asText());
            assertTrue(other.get("note").asText().contains("new ProcessorGrid(2, 4)"), other.toString());
            boolean faster = other.get("total_seconds").asDouble() < a2d.get("total_seconds").asDouble();
            assertEquals(faster, a2d.has("note") && a2d.get("note").asText().contains("2 x 4 grid is faster"),
                    a2d.toString());
        }
        assertFalse(run.out().contains("not implemented"), run.out());
    }

    @Test
    void pricesTheGivenTeamSizeAndPlansLinearAttention() {
        CliRun wall = CliRun.of("plan", "--cluster", "wallfacer-h100", "--model", "llama-30b", "-N", "64k",
                "--layers", "1", "--team-size", "4");
        assertEquals(0, wall.exitCode(), wall.err());
        assertTrue(wall.out().lines().anyMatch(l -> l.startsWith("wallfacer ") && l.contains("C=4, ")), wall.out());
        CliRun linear = CliRun.of("plan", "--cluster", "lasp-dgx-a100", "--heads", "16", "--head-dim", "128",
                "-N", "256k", "--causal", "--attention", "linear");
        assertEquals(0, linear.exitCode(), linear.err());
        assertTrue(linear.out().contains("fastest: lasp (serial chain of 128)"), linear.out());
        assertTrue(linear.out().contains("ring                 n/a: softmax attention"), linear.out());
    }

    @Test
    void measuresTheAttentionRateOnThisMachine() {
        CliRun run = CliRun.of("plan", "--nodes", "1", "--workers-per-node", "2", "--intra-bw", "10", "--heads", "4",
                "--head-dim", "64", "-N", "2048", "--measure");
        assertEquals(0, run.exitCode(), run.err());
        Matcher rate = Pattern.compile("attention kernel (\\S+) TFLOP/s \\(measured on this machine")
                .matcher(run.out());
        assertTrue(rate.find(), run.out());
        assertTrue(Double.parseDouble(rate.group(1)) > 0, rate.group(1));
    }

    static Stream<Arguments> badInputs() {
        String[] cluster = {"--cluster", "a100-16", "--model", "gpt3-2.7b"};
        return Stream.of(
                bad("P = 0", "--nodes must be >= 1, got 0", cluster, "--nodes", "0", "-N", "8k"),
                bad("N not divisible", "--seq-len 1000 is not a multiple of P = 16 (every worker holds N/P positions)",
                        cluster, "-N", "1000"),
                bad("negative bandwidth", "--inter-bw must be a finite positive number (GB/s), got -1.0", cluster,
                        "--inter-bw", "-1", "-N", "8k"),
                bad("negative latency", "--intra-latency must be a finite number >= 0 (us), got -3.0", cluster,
                        "--intra-latency", "-3", "-N", "8k"),
                bad("unknown cluster preset", "unknown cluster preset 'dgx-z'; expected one of a100-16, a100-64",
                        new String[] {"--cluster", "dgx-z", "--model", "gpt3-2.7b"}, "-N", "8k"),
                bad("unknown model preset", "unknown model preset 'gpt5'; expected one of gpt3-760m",
                        new String[] {"--cluster", "a100-16", "--model", "gpt5"}, "-N", "8k"),
                bad("heads not a multiple", "--heads 32 is not a multiple of --kv-heads 5", cluster, "--kv-heads",
                        "5", "-N", "8k"),
                bad("zero rate", "--rate must be a finite positive number (TFLOP/s), got 0.0", cluster, "--rate",
                        "0", "-N", "8k"),
                bad("rate and measure", "--rate and --measure exclude each other", cluster, "--rate", "10",
                        "--measure", "-N", "8k"),
                bad("no rate", "give --rate TFLOPS, --measure or a --cluster preset",
                        new String[] {"--nodes", "1", "--workers-per-node", "2", "--intra-bw", "10"}, "--heads", "4",
                        "--head-dim", "8", "-N", "64"),
                bad("cluster incomplete", "without --cluster give --workers-per-node, --intra-bw",
                        new String[] {"--nodes", "2", "--inter-bw", "1"}, "--heads", "4", "--head-dim", "8",
                        "--rate", "1", "-N", "64"),
                bad("model incomplete", "without --model give --heads and --head-dim",
                        new String[] {"--cluster", "a100-16"}, "--heads", "4", "-N", "8k"),
                bad("bad length", "--seq-len must be lengths such as 8192 or 8k,16k, got \"8k,lots\"", cluster,
                        "-N", "8k,lots"),
                bad("zero length", "--seq-len must be >= 1, got 0", cluster, "-N", "0"),
                bad("attention kind", "--attention must be softmax or linear, got 'sparse'", cluster, "--attention",
                        "sparse", "-N", "8k"),
                bad("team size", "--team-size 3: C must be >= 1 with C^2 dividing P = 16", cluster, "--team-size",
                        "3", "-N", "8k"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badInputs")
    void refusesBadInputWithOneLine(String what, String message, String[] args) {
        String[] all = Stream.concat(Stream.of("plan"), Arrays.stream(args)).toArray(String[]::new);
        CliRun run = CliRun.of(all);
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode(), what + ": " + run.err() + run.out());
        assertEquals(1, run.errLines().length, what + ": stderr was:\n" + run.err());
        String line = run.errLines()[0];
        assertTrue(line.startsWith("plan: "), line);
        assertTrue(line.contains(message), what + ": expected '" + message + "' in: " + line);
        assertFalse(line.contains("Exception"), line);
        assertTrue(run.out().isEmpty(), what + ": printed a plan anyway:\n" + run.out());
    }

    private static Arguments bad(String what, String message, String[] base, String... more) {
        return Arguments.of(what, message, Stream.concat(Arrays.stream(base), Arrays.stream(more))
                .toArray(String[]::new));
    }

    @Test
    void leavesNoFileBehindWhenRefused() {
        Path json = tmp.resolve("plan.json");
        CliRun run = CliRun.of("plan", "--cluster", "a100-16", "--model", "gpt3-2.7b", "-N", "1000", "--json",
                json.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertFalse(Files.exists(json));
    }
}
