package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A process without the job token cannot inject data into a job over the real Aeron transport. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class JobTokenProcessTest {

    @Test
    void aProcessWithoutTheTokenCannotInjectData(@TempDir Path dir) throws Exception {
        // One launch of three processes: ranks 0 and 1 form a job of two (over IPC, sharing this host); the third
        // claims to be rank 1 of that job (it knows rank 0's endpoint) but has another token. It comes over UDP:
        // the job's IPC logs live in a driver directory named after the job, which another token never finds.
        int[] ports = FreePorts.udp(3);
        String job = "127.0.0.1:" + ports[0] + ",127.0.0.1:" + ports[1];
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(3, TokenWorker.class.getName()).heap("512m").ports(ports)
                .timeout(Duration.ofSeconds(80)).output(out::add, out::add)
                .env(WorkerEnvironment.WORLD_SIZE, "2").env(WorkerEnvironment.TIMEOUT_MS, "20000")
                .env("ATTN4J_TEST_DROPS_SEEN", dir.resolve("drops-seen").toString())
                .rankEnv(0, WorkerEnvironment.PEERS, job).rankEnv(0, "ATTN4J_TEST_ROLE", "victim")
                .rankEnv(1, WorkerEnvironment.PEERS, job).rankEnv(1, "ATTN4J_TEST_ROLE", "genuine")
                .rankEnv(2, WorkerEnvironment.RANK, "1").rankEnv(2, "ATTN4J_TEST_ROLE", "intruder")
                .rankEnv(2, WorkerEnvironment.PEERS, "127.0.0.1:" + ports[0] + ",127.0.0.1:" + ports[2])
                .rankEnv(2, WorkerEnvironment.JOB_TOKEN, LocalLauncher.newJobToken())
                .rankEnv(2, org.attn4j.distributed.transport.AeronTransportContext.ENV_IPC, "0")
                .rankEnv(2, org.attn4j.distributed.transport.AeronTransportContext.ENV_NETWORK, "udp")
                .build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 0] VERDICT victim OK: dropped ")
                && l.endsWith("received the genuine array")), output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 2] VERDICT intruder done: 0 of 5")), output);
    }
}
