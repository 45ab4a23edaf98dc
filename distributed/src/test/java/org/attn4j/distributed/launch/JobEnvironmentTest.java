package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.attn4j.distributed.launch.WorkerEnvironment.Endpoint;
import org.junit.jupiter.api.Test;

/** Rank, world size and master from each launcher's variables, and one-line refusals of bad values. */
class JobEnvironmentTest {

    private static final String TOKEN = "0123456789abcdef0123";

    private static Map<String, String> env(String... pairs) {
        Map<String, String> m = new HashMap<>();
        m.put("ATTN4J_JOB_TOKEN", TOKEN);
        for (int i = 0; i < pairs.length; i += 2) {
            m.put(pairs[i], pairs[i + 1]);
        }
        return m;
    }

    private static void assertJob(JobEnvironment j, String launcher, int rank, int world, int local, String host,
                                  int port) {
        assertEquals(launcher, j.launcher());
        assertEquals(rank, j.rank());
        assertEquals(world, j.worldSize());
        assertEquals(local, j.localRank());
        assertEquals(Optional.of(new Endpoint(host, port)), j.master());
        assertTrue(j.peers().isEmpty());
    }

    @Test
    void torchrun() {
        Map<String, String> e = env("RANK", "2", "WORLD_SIZE", "4", "LOCAL_RANK", "0", "MASTER_ADDR", "10.0.0.1",
                "MASTER_PORT", "29501");
        assertEquals(Optional.of("torchrun"), JobEnvironment.launcherOf(e));
        assertJob(JobEnvironment.from(e), "torchrun", 2, 4, 0, "10.0.0.1", 29501);
        e.put("ATTN4J_MASTER_ADDR", "head");
        e.put("ATTN4J_MASTER_PORT", "4000");
        assertJob(JobEnvironment.from(e), "torchrun", 2, 4, 0, "head", 4000);
        e.remove("ATTN4J_MASTER_PORT");
        e.remove("MASTER_PORT");
        assertEquals(29500, JobEnvironment.from(e).master().orElseThrow().port(), "torchrun's default port");
    }

    @Test
    void underTorchrunsAgentTheRendezvousTakesThePortAfterItsStore() {
        Map<String, String> e = env("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "n1", "MASTER_PORT", "29500",
                "TORCHELASTIC_USE_AGENT_STORE", "True", "TORCHELASTIC_RUN_ID", "none");
        assertEquals(29501, JobEnvironment.from(e).master().orElseThrow().port());
        e.put("ATTN4J_MASTER_PORT", "30000");
        assertEquals(30000, JobEnvironment.from(e).master().orElseThrow().port(), "an explicit port is kept");
        e.remove("ATTN4J_MASTER_PORT");
        e.put("TORCHELASTIC_USE_AGENT_STORE", "False");
        assertEquals(29500, JobEnvironment.from(e).master().orElseThrow().port());
    }

    @Test
    void slurmWithTheMasterFromTheCompressedNodeList() {
        Map<String, String> e = env("SLURM_PROCID", "5", "SLURM_NTASKS", "8", "SLURM_LOCALID", "1",
                "SLURM_JOB_NODELIST", "gpu[07-10],cpu1");
        assertEquals(Optional.of("slurm"), JobEnvironment.launcherOf(e));
        assertJob(JobEnvironment.from(e), "slurm", 5, 8, 1, "gpu07", 29500);
        e.put("MASTER_ADDR", "login2");
        assertEquals("login2", JobEnvironment.from(e).master().orElseThrow().host(), "MASTER_ADDR wins");
        e.remove("MASTER_ADDR");
        e.put("SLURM_JOB_NODELIST", "gpu[07-");
        assertRefused(e, "host list \"gpu[07-\"");
    }

    @Test
    void openMpiAndPmi() {
        Map<String, String> e = env("OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "4",
                "OMPI_COMM_WORLD_LOCAL_RANK", "1", "MASTER_ADDR", "n1", "MASTER_PORT", "7000");
        assertJob(JobEnvironment.from(e), "open-mpi", 3, 4, 1, "n1", 7000);
        Map<String, String> p = env("PMI_RANK", "1", "PMI_SIZE", "2", "MASTER_ADDR", "n1");
        assertJob(JobEnvironment.from(p), "pmi", 1, 2, -1, "n1", 29500);
        p.put("MPI_LOCALRANKID", "1");
        assertEquals(1, JobEnvironment.from(p).localRank());
    }

    @Test
    void kubernetesIndexedJob() {
        Map<String, String> e = env("JOB_COMPLETION_INDEX", "3", "ATTN4J_WORLD_SIZE", "4", "MASTER_ADDR",
                "attn4j-0.attn4j", "MASTER_PORT", "29500");
        assertEquals(Optional.of("kubernetes"), JobEnvironment.launcherOf(e));
        assertJob(JobEnvironment.from(e), "kubernetes", 3, 4, -1, "attn4j-0.attn4j", 29500);
        e.remove("ATTN4J_WORLD_SIZE");
        assertRefused(e, "WORLD_SIZE is not set", "JOB_COMPLETION_INDEX", "completions");
        e.put("WORLD_SIZE", "4");
        assertEquals(4, JobEnvironment.from(e).worldSize());
    }

    @Test
    void precedenceIsAttn4jTorchrunSlurmMpiPmiKubernetes() {
        Map<String, String> e = env("JOB_COMPLETION_INDEX", "0", "PMI_RANK", "1", "PMI_SIZE", "8",
                "OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "8", "SLURM_PROCID", "3", "SLURM_NTASKS", "8",
                "RANK", "4", "WORLD_SIZE", "8", "ATTN4J_RANK", "5", "ATTN4J_WORLD_SIZE", "8", "MASTER_ADDR", "m");
        String[][] layers = {{"ATTN4J_RANK", "attn4j", "5"}, {"RANK", "torchrun", "4"}, {"SLURM_PROCID", "slurm", "3"},
                {"OMPI_COMM_WORLD_RANK", "open-mpi", "2"}, {"PMI_RANK", "pmi", "1"},
                {"JOB_COMPLETION_INDEX", "kubernetes", "0"}};
        for (String[] layer : layers) {
            JobEnvironment j = JobEnvironment.from(e);
            assertEquals(layer[1], j.launcher());
            assertEquals(Integer.parseInt(layer[2]), j.rank());
            e.remove(layer[0]);
        }
        assertEquals(Optional.empty(), JobEnvironment.launcherOf(e));
    }

    @Test
    void aPeerListMeansNoRendezvous() {
        Map<String, String> e = env("RANK", "1", "WORLD_SIZE", "2", "ATTN4J_PEERS", "h1:1,h2:2", "MASTER_ADDR", "m");
        JobEnvironment j = JobEnvironment.from(e);
        assertEquals(List.of(new Endpoint("h1", 1), new Endpoint("h2", 2)), j.peers());
        assertTrue(j.master().isEmpty());
        assertEquals(new Endpoint("h2", 2), j.connect().self(), "a static table needs no traffic");
    }

    @Test
    void readsTimeoutsBindAndPort() {
        Map<String, String> e = env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m",
                "ATTN4J_RENDEZVOUS_TIMEOUT_MS", "1500", "ATTN4J_TIMEOUT_MS", "9000", "ATTN4J_BIND", "10.1.2.3",
                "ATTN4J_PORT", "40000");
        JobEnvironment j = JobEnvironment.from(e);
        assertEquals(Duration.ofMillis(1500), j.rendezvousTimeout());
        assertEquals(Duration.ofMillis(9000), j.timeout());
        assertEquals(Optional.of("10.1.2.3"), j.bind());
        assertEquals(40000, j.port());
        assertEquals(JobEnvironment.DEFAULT_RENDEZVOUS_TIMEOUT, JobEnvironment.from(env("RANK", "0", "WORLD_SIZE",
                "2", "MASTER_ADDR", "m")).rendezvousTimeout());
        assertFalse(j.toString().contains(TOKEN));
    }

    @Test
    void refusesMalformedValuesNamingTheVariable() {
        assertRefused(env("RANK", "two", "WORLD_SIZE", "4", "MASTER_ADDR", "m"), "RANK: expected", "got \"two\"");
        assertRefused(env("RANK", "4", "WORLD_SIZE", "4", "MASTER_ADDR", "m"), "RANK: expected an integer in [0, 4)",
                "got 4");
        assertRefused(env("RANK", "0", "MASTER_ADDR", "m"), "WORLD_SIZE is not set", "torchrun");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "0", "MASTER_ADDR", "m"), "WORLD_SIZE: expected an integer >= 1",
                "got 0");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "x", "MASTER_ADDR", "m"), "LOCAL_RANK",
                "got \"x\"");
        assertRefused(env("SLURM_PROCID", "0", "SLURM_NTASKS", "n", "SLURM_JOB_NODELIST", "a"), "SLURM_NTASKS",
                "got \"n\"");
        assertRefused(env("SLURM_PROCID", "-1", "SLURM_NTASKS", "2", "SLURM_JOB_NODELIST", "a"), "SLURM_PROCID",
                "got -1");
        assertRefused(env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2"),
                "no way to find the other ranks", "MASTER_ADDR");
        assertRefused(env("PMI_RANK", "1.5", "PMI_SIZE", "2", "MASTER_ADDR", "m"), "PMI_RANK", "got \"1.5\"");
        assertRefused(env("JOB_COMPLETION_INDEX", "9", "WORLD_SIZE", "4", "MASTER_ADDR", "m"),
                "JOB_COMPLETION_INDEX: expected an integer in [0, 4)", "got 9");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m", "MASTER_PORT", "70000"),
                "MASTER_PORT: expected a TCP port", "got 70000");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m", "MASTER_PORT", "http"),
                "MASTER_PORT", "got \"http\"");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "a,b"), "MASTER_ADDR: expected one host",
                "got \"a,b\"");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m", "ATTN4J_RENDEZVOUS_TIMEOUT_MS", "-5"),
                "ATTN4J_RENDEZVOUS_TIMEOUT_MS: expected a positive number", "got -5");
        assertRefused(env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m", "ATTN4J_PORT", "0"), "ATTN4J_PORT",
                "got 0");
        Map<String, String> noToken = env("RANK", "0", "WORLD_SIZE", "2", "MASTER_ADDR", "m");
        noToken.remove("ATTN4J_JOB_TOKEN");
        assertRefused(noToken, "ATTN4J_JOB_TOKEN is not set", "openssl rand");
        assertRefused(env(), "ATTN4J_RANK is not set", "RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK");
    }

    private static void assertRefused(Map<String, String> env, String... parts) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JobEnvironment.from(env));
        for (String part : parts) {
            assertTrue(e.getMessage().contains(part), "message \"" + e.getMessage() + "\" lacks \"" + part + "\"");
        }
        assertFalse(e.getMessage().contains("\n"), "one line: " + e.getMessage());
        assertFalse(e.getMessage().contains(TOKEN), e.getMessage());
    }
}
