package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Ranks meeting at a master on loopback, in threads of this JVM: the table, and every way it can fail. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RendezvousTest {

    private static final String TOKEN = "rendezvous-test-token-0123";
    private final ExecutorService pool = Executors.newCachedThreadPool();
    private final int port = freeTcpPort();

    @AfterEach
    void stop() {
        pool.shutdownNow();
    }

    private Map<String, String> env(int rank, int world, String token, long timeoutMs) {
        Map<String, String> m = new HashMap<>();
        m.put("RANK", Integer.toString(rank));
        m.put("WORLD_SIZE", Integer.toString(world));
        m.put("MASTER_ADDR", "127.0.0.1");
        m.put("MASTER_PORT", Integer.toString(port));
        m.put("ATTN4J_JOB_TOKEN", token);
        m.put("ATTN4J_RENDEZVOUS_TIMEOUT_MS", Long.toString(timeoutMs));
        return m;
    }

    private Future<WorkerEnvironment> start(Map<String, String> env) {
        return pool.submit(() -> WorkerEnvironment.from(env));
    }

    @Test
    void everyRankGetsTheSameTableOfDistinctEndpointsOnTheRouteToTheMaster() throws Exception {
        List<Future<WorkerEnvironment>> ranks = new ArrayList<>();
        for (int r = 3; r >= 0; r--) {                      // rank 0 last: the others wait for it
            ranks.add(0, start(env(r, 4, TOKEN, 20_000)));
        }
        List<WorkerEnvironment.Endpoint> table = ranks.get(0).get().peers();
        assertEquals(4, new HashSet<>(table).size(), "distinct endpoints: " + table);
        for (int r = 0; r < 4; r++) {
            WorkerEnvironment w = ranks.get(r).get();
            assertEquals(r, w.rank());
            assertEquals(table, w.peers());
            assertEquals("127.0.0.1", w.self().host(), "the route to a loopback master is loopback");
            assertEquals(java.util.Optional.of("127.0.0.1"), w.bind());
        }
    }

    @Test
    void aWrongTokenIsRefusedAndTheJobGoesOn() throws Exception {
        Future<WorkerEnvironment> master = start(env(0, 2, TOKEN, 20_000));
        Future<WorkerEnvironment> intruder = start(env(1, 2, "another-jobs-token-456789", 20_000));
        String refusal = failure(intruder);
        assertTrue(refusal.contains("refused this worker: wrong job token"), refusal);
        Future<WorkerEnvironment> genuine = start(env(1, 2, TOKEN, 20_000));
        assertEquals(master.get().peers(), genuine.get().peers());
    }

    @Test
    void ranksThatNeverArriveAreNamedByEveryRankWithinTheTimeout() {
        Future<WorkerEnvironment> r0 = start(env(0, 4, TOKEN, 4_000));
        Future<WorkerEnvironment> r2 = start(env(2, 4, TOKEN, 4_000));
        for (Future<WorkerEnvironment> f : List.of(r0, r2)) {
            String m = failure(f);
            assertTrue(m.contains("ranks 1, 3 of 4 never arrived within 4 s"), m);
        }
    }

    @Test
    void aMissingMasterIsNamedAsRankZero() {
        String m = failure(start(env(1, 2, TOKEN, 1_500)));
        assertTrue(m.contains("rank 0 (the master) did not answer within 1500 ms"), m);
    }

    @Test
    void aDuplicateRankFailsEveryRankAtOnce() {
        // A rendezvous timeout of 10 minutes: only failing at once ends this within the test's minute.
        Future<WorkerEnvironment> r0 = start(env(0, 3, TOKEN, 600_000));
        Future<WorkerEnvironment> a = start(env(1, 3, TOKEN, 600_000));
        Future<WorkerEnvironment> b = start(env(1, 3, TOKEN, 600_000));
        for (Future<WorkerEnvironment> f : List.of(r0, a, b)) {
            String m = failure(f);
            assertTrue(m.contains("rank 1 registered twice"), m);
        }
    }

    @Test
    void aWorldSizeMismatchFailsEveryRankAtOnce() {
        Future<WorkerEnvironment> r0 = start(env(0, 2, TOKEN, 600_000));
        Future<WorkerEnvironment> r1 = start(env(1, 3, TOKEN, 600_000));
        for (Future<WorkerEnvironment> f : List.of(r0, r1)) {
            String m = failure(f);
            assertTrue(m.contains("world size mismatch: rank 1") && m.contains("says 3, rank 0 says 2"), m);
        }
    }

    @Test
    void rankZeroMustRunOnTheMasterHost() {
        Map<String, String> e = env(0, 2, TOKEN, 2_000);
        e.put("MASTER_ADDR", "192.0.2.1");                  // TEST-NET-1: never an address of this host
        e.put("ATTN4J_BIND", "127.0.0.1");
        String m = failure(start(e));
        assertTrue(m.contains("rank 0 cannot listen on 192.0.2.1:" + port), m);
    }

    private static String failure(Future<WorkerEnvironment> f) {
        try {
            f.get(60, TimeUnit.SECONDS);
            throw new AssertionError("expected the rendezvous to fail");
        } catch (ExecutionException e) {
            assertInstanceOf(RendezvousException.class, e.getCause(), e.getCause().toString());
            assertFalse(e.getCause().getMessage().contains("\n"), e.getCause().getMessage());
            assertFalse(e.getCause().getMessage().contains(TOKEN));
            return e.getCause().getMessage();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    private static int freeTcpPort() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }
}
