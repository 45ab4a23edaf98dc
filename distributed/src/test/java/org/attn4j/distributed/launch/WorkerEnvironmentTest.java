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
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Reading and refusing worker environments. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class WorkerEnvironmentTest {

    private static final String TOKEN = "0123456789abcdef0123";

    private static Map<String, String> good() {
        Map<String, String> m = new HashMap<>();
        m.put("ATTN4J_RANK", "1");
        m.put("ATTN4J_WORLD_SIZE", "3");
        m.put("ATTN4J_PEERS", "127.0.0.1:40001, node2:40002,[::1]:40003");
        m.put("ATTN4J_JOB_TOKEN", TOKEN);
        return m;
    }

    @Test
    void readsEveryVariable() {
        Map<String, String> m = good();
        m.put("ATTN4J_TIMEOUT_MS", "5000");
        m.put("ATTN4J_BIND", "0.0.0.0");
        m.put("ATTN4J_AERON_DIR", "/dev/shm/aeron-x");
        WorkerEnvironment e = WorkerEnvironment.from(m);
        assertEquals(1, e.rank());
        assertEquals(3, e.worldSize());
        assertEquals(List.of(new WorkerEnvironment.Endpoint("127.0.0.1", 40001),
                new WorkerEnvironment.Endpoint("node2", 40002), new WorkerEnvironment.Endpoint("::1", 40003)),
                e.peers());
        assertEquals(new WorkerEnvironment.Endpoint("node2", 40002), e.self());
        assertEquals(Duration.ofSeconds(5), e.timeout());
        assertEquals(Optional.of("0.0.0.0"), e.bind());
        assertEquals(Optional.of("/dev/shm/aeron-x"), e.aeronDir());
        assertEquals(e, WorkerEnvironment.from(e.toVariables()), "round trip through the variables");
        assertFalse(e.toString().contains(TOKEN), "the token never shows");
    }

    @Test
    void defaultsTimeoutBindAndAeronDir() {
        WorkerEnvironment e = WorkerEnvironment.from(good());
        assertEquals(WorkerEnvironment.DEFAULT_TIMEOUT, e.timeout());
        assertTrue(e.bind().isEmpty() && e.aeronDir().isEmpty());
    }

    @Test
    void refusesMissingVariablesNamingThem() {
        for (String name : List.of("ATTN4J_RANK", "ATTN4J_WORLD_SIZE", "ATTN4J_JOB_TOKEN")) {
            Map<String, String> m = good();
            m.remove(name);
            assertRefused(m, name + " is not set: expected");
        }
        Map<String, String> m = good();
        m.remove("ATTN4J_PEERS");
        assertRefused(m, "no way to find the other ranks: set MASTER_ADDR and MASTER_PORT", "or ATTN4J_PEERS");
    }

    @Test
    void refusesBadValuesNamingVariableExpectedAndActual() {
        assertRefused(with("ATTN4J_RANK", "one"), "ATTN4J_RANK: expected this worker's rank", "got \"one\"");
        assertRefused(with("ATTN4J_RANK", "3"), "ATTN4J_RANK: expected an integer in [0, 3)", "got 3");
        assertRefused(with("ATTN4J_RANK", "-1"), "ATTN4J_RANK", "got -1");
        assertRefused(with("ATTN4J_WORLD_SIZE", "0"), "ATTN4J_WORLD_SIZE: expected an integer >= 1, got 0");
        assertRefused(with("ATTN4J_WORLD_SIZE", "2"), "ATTN4J_PEERS: expected 2 host:port entries", "got 3");
        assertRefused(with("ATTN4J_PEERS", "a:1,b:2,c"), "ATTN4J_PEERS entry 2: expected host:port", "got \"c\"");
        assertRefused(with("ATTN4J_PEERS", "a:1,b:70000,c:3"), "ATTN4J_PEERS entry 1", "got \"b:70000\"");
        assertRefused(with("ATTN4J_PEERS", "a:1,::1:2,c:3"), "ATTN4J_PEERS entry 1", "[addr]:port");
        assertRefused(with("ATTN4J_PEERS", "a:1,b:2,a:1"), "ATTN4J_PEERS: expected a distinct endpoint",
                "a:1 for ranks 0 and 2");
        assertRefused(with("ATTN4J_JOB_TOKEN", "short"), "ATTN4J_JOB_TOKEN: expected a secret of at least 16",
                "got 5 characters");
        assertRefused(with("ATTN4J_TIMEOUT_MS", "5s"), "ATTN4J_TIMEOUT_MS: expected a positive number", "got \"5s\"");
        assertRefused(with("ATTN4J_TIMEOUT_MS", "0"), "ATTN4J_TIMEOUT_MS", "got 0");
    }

    @Test
    void neverPrintsTheTokenInAnError() {
        String almost = "a-secret-token-";                  // 15 characters: refused
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> WorkerEnvironment.from(with("ATTN4J_JOB_TOKEN", almost)));
        assertFalse(e.getMessage().contains(almost), e.getMessage());
    }

    private static Map<String, String> with(String name, String value) {
        Map<String, String> m = good();
        m.put(name, value);
        return m;
    }

    private static void assertRefused(Map<String, String> env, String... parts) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> WorkerEnvironment.from(env));
        for (String part : parts) {
            assertTrue(e.getMessage().contains(part), "message \"" + e.getMessage() + "\" lacks \"" + part + "\"");
        }
    }
}
