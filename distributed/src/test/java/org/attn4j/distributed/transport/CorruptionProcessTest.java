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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A chunk damaged on the wire between two real processes is caught by the checksum and never delivered. */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class CorruptionProcessTest {

    @Test
    void aCorruptedChunkBetweenProcessesIsDetectedByTheChecksum() throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(2, CorruptionWorker.class.getName()).heap("512m")
                .timeout(Duration.ofSeconds(80)).output(out::add, out::add)
                .env(WorkerEnvironment.TIMEOUT_MS, "20000").build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 1] VERDICT refused: ")), output);
        assertTrue(out.stream().anyMatch(l -> l.startsWith("[rank 1] VERDICT next message intact: true, corrupt "
                + "count 1")), output);
    }
}
