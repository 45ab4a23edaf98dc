package org.attn4j.distributed.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.launch.WorkerEnvironment;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Timeout;

/**
 * A chunk damaged on the wire between two real processes is caught by the checksum and never delivered: over UDP
 * and TCP, where the checksum is always on, and over IPC with the optional checksum turned on.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class CorruptionProcessTest {

    @ParameterizedTest
    @ValueSource(strings = {"udp", "tcp", "ipc"})
    void aCorruptedChunkBetweenProcessesIsDetectedByTheChecksum(String path) throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(2, CorruptionWorker.class.getName()).heap("512m")
                .timeout(Duration.ofSeconds(80)).output(out::add, out::add)
                .env(WorkerEnvironment.TIMEOUT_MS, "20000")
                .env(AeronTransportContext.ENV_IPC, path.equals("ipc") ? "1" : "0")
                .env(AeronTransportContext.ENV_NETWORK, path.equals("udp") ? "udp" : "tcp")
                .env(AeronTransportContext.ENV_IPC_CHECKSUMS, "1").build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 1] VERDICT refused: ")), output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 1] VERDICT next message intact: true, corrupt "
                + "count 1")), output);
    }
}
