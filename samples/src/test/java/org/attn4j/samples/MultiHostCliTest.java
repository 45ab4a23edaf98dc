package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.launch.NamespaceCluster;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.io.Npy;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
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

/**
 * The CLI as one rank per "host" (a network namespace with its own address and working directory), started with
 * nothing but the variables each scheduler sets, as the recipes in docs/distributed.md do: torchrun's, Slurm's
 * (master from the compressed node list, names resolved by the hosts' /etc/hosts), Open MPI's and a Kubernetes
 * indexed Job's. Rank 0 writes the result, equal to the single-device op; the other ranks write nothing.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class MultiHostCliTest {

    private static final int HOSTS = 4;
    private static NamespaceCluster cluster;

    @TempDir
    Path dir;

    @BeforeAll
    static void createHosts() throws Exception {
        java.util.Optional<String> why = NamespaceCluster.unavailable();
        Assumptions.assumeTrue(why.isEmpty(), () -> "skipped: " + why.orElseThrow());
        cluster = NamespaceCluster.create(HOSTS, 0);
    }

    @AfterAll
    static void removeHosts() {
        if (cluster != null) {
            cluster.close();
        }
    }

    /** The variables of one scheduler for rank r of four, master on host 0. */
    private static IntFunction<Map<String, String>> variables(String scheduler) {
        String n = Integer.toString(HOSTS);
        return switch (scheduler) {
            case "torchrun" -> r -> Map.of("RANK", "" + r, "WORLD_SIZE", n, "LOCAL_RANK", "0",
                    "MASTER_ADDR", cluster.address(0), "MASTER_PORT", "29500");
            case "slurm" -> r -> Map.of("SLURM_PROCID", "" + r, "SLURM_NTASKS", n, "SLURM_LOCALID", "0",
                    "SLURM_JOB_NODELIST", "node[1-" + HOSTS + "]");
            case "open-mpi" -> r -> Map.of("OMPI_COMM_WORLD_RANK", "" + r, "OMPI_COMM_WORLD_SIZE", n,
                    "OMPI_COMM_WORLD_LOCAL_RANK", "0", "MASTER_ADDR", cluster.hostName(0));
            case "kubernetes" -> r -> Map.of("JOB_COMPLETION_INDEX", "" + r, "ATTN4J_WORLD_SIZE", n,
                    "MASTER_ADDR", cluster.hostName(0), "MASTER_PORT", "29400");
            default -> throw new IllegalArgumentException(scheduler);
        };
    }

    /** The CLI on every host, in its own working directory {@code DIR/host-r}. */
    private LaunchResult run(String scheduler, List<String> args, List<String> out) throws Exception {
        for (int r = 0; r < HOSTS; r++) {
            Files.createDirectories(dir.resolve("host-" + r));
        }
        return LocalLauncher.builder(HOSTS, Attn4jCli.class.getName()).args(args)
                .scheduler(variables(scheduler))
                .prefix(r -> {
                    List<String> p = new ArrayList<>(cluster.prefix(r));
                    p.addAll(List.of("env", "-C", dir.resolve("host-" + r).toString()));
                    return p;
                })
                .heap("1g").timeout(Duration.ofSeconds(200)).env("ATTN4J_TIMEOUT_MS", "20000")
                .output(out::add, out::add).build().run();
    }

    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource({"torchrun, ring", "slurm, wallfacer --team 2", "open-mpi, attention2d", "kubernetes, ulysses"})
    void checkUnderEachSchedulerEqualsTheSingleDeviceOp(String scheduler, String algo) throws Exception {
        CheckFixture f = CheckFixture.random(DataType.DOUBLE, 1, 4, 4, 64, 8, scheduler.hashCode());
        Path in = f.writeTo(dir.resolve("in"));
        List<String> args = new ArrayList<>(List.of("check", "--algo"));
        args.addAll(List.of(algo.split(" ")));
        args.addAll(List.of("--causal", "--in", in.toString(), "--out", "out"));
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = run(scheduler, args, out);
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);

        Path result = dir.resolve("host-0").resolve("out");
        double scale = FlashAttention.defaultScale(8);
        AttentionOutput o = FlashAttention.defaults().forward(f.q(), f.k(), f.v(), AttentionMask.causal(), scale);
        AttentionGradients g = FlashAttention.defaults().backward(f.q(), f.k(), f.v(), o.output(), o.lse(), f.dO(),
                AttentionMask.causal(), scale);
        INDArray[] expected = {o.output(), o.lse(), g.dq(), g.dk(), g.dv()};
        String[] files = {"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy"};
        for (int i = 0; i < files.length; i++) {
            INDArray got = Npy.read(result.resolve(files[i]));
            double err = got.sub(expected[i]).norm2Number().doubleValue() / expected[i].norm2Number().doubleValue();
            assertTrue(err <= 1e-12, scheduler + " " + files[i] + " relative error " + err);
        }
        JsonNode stats = new ObjectMapper().readTree(result.resolve("stats.json").toFile());
        assertEquals(HOSTS, stats.get("workers").asInt());
        assertEquals(HOSTS, stats.get("ranks").size());
        for (JsonNode rank : stats.get("bytes_sent")) {
            assertTrue(rank.get("forward").asLong() > 0, "every rank sent: " + stats.get("bytes_sent"));
        }
        for (int rank = 1; rank < HOSTS; rank++) {
            assertFalse(Files.exists(dir.resolve("host-" + rank).resolve("out")), "rank " + rank + " writes nothing");
        }
        assertEquals(1, out.stream().filter(l -> l.contains("check " + algo.split(" ")[0] + ": ")).count(),
                "one summary line, from rank 0\n" + output);
    }

    @Test
    void trainUnderTorchrunPrintsTheLossesOfOneProcess() throws Exception {
        CliRun one = CliRun.of("train", "--steps", "4", "--seed", "1", "--out", dir.resolve("one").toString());
        assertEquals(0, one.exitCode(), one.err());
        List<Double> expected = losses(List.of(one.out().split("\n")), "");
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = run("torchrun", List.of("train", "--strategy", "ring", "--steps", "4", "--seed", "1",
                "--out", "run"), out);
        assertEquals(0, r.exitCode(), r + "\n" + String.join("\n", out));
        List<Double> got = losses(out, "[rank 0] ");
        assertEquals(4, expected.size(), one.out());
        assertEquals(expected.size(), got.size(), String.join("\n", out));
        for (int i = 0; i < expected.size(); i++) {
            assertEquals(expected.get(i), got.get(i), 1e-4 * Math.abs(expected.get(i)), "step " + i);
        }
        assertTrue(Files.exists(dir.resolve("host-0").resolve("run").resolve("model.zip")));
        for (int rank = 1; rank < HOSTS; rank++) {
            assertFalse(Files.exists(dir.resolve("host-" + rank).resolve("run")), "rank " + rank + " writes nothing");
        }
    }

    @Test
    void benchDistributedUnderOpenMpiWritesOneTableOnRankZero() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = run("open-mpi", List.of("bench", "distributed", "--algos", "ring,ulysses", "--lengths", "64",
                "--heads", "4", "--kv-heads", "4", "--dim", "8", "--repeats", "1", "--out", "bench"), out);
        assertEquals(0, r.exitCode(), r + "\n" + String.join("\n", out));
        List<String> csv = Files.readAllLines(dir.resolve("host-0").resolve("bench").resolve("bench-distributed.csv"));
        assertEquals(3, csv.size(), String.join("\n", csv));
        assertTrue(csv.get(1).startsWith("ring,4,64,") && csv.get(2).startsWith("ulysses,4,64,"), csv.toString());
        assertTrue(Files.readString(dir.resolve("host-0").resolve("bench").resolve("benchmarks.md"))
                .contains("P ranks started by open-mpi"));
        for (int rank = 1; rank < HOSTS; rank++) {
            assertFalse(Files.exists(dir.resolve("host-" + rank).resolve("bench")), "rank " + rank + " writes nothing");
        }
    }

    private static List<Double> losses(List<String> lines, String prefix) {
        List<Double> losses = new ArrayList<>();
        for (String line : lines) {
            if (line.startsWith(prefix + "step ") && line.contains(" loss ")) {
                losses.add(Double.parseDouble(line.substring(line.indexOf(" loss ") + 6).strip()));
            }
        }
        return losses;
    }
}
