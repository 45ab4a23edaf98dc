package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Ring, Ulysses and LASP attention in real worker processes over Aeron equal single-device attention. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SequenceProcessTest {

    @ParameterizedTest(name = "P={0}")
    @ValueSource(ints = {2, 4})
    void everyAlgorithmMatchesSingleDeviceAttentionInRealProcesses(int p) throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(p, SequenceWorker.class.getName()).heap("512m")
                .timeout(Duration.ofSeconds(100)).output(out::add, out::add).env("ATTN4J_TIMEOUT_MS", "30000")
                .build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        for (String algo : new String[] {"ring", "ulysses", "lasp"}) {
            long ok = out.stream().filter(l -> l.contains("VERDICT " + algo + " OK")).count();
            assertEquals(p, ok, algo + ": every rank must report OK\n" + output);
        }
        assertTrue(out.stream().noneMatch(l -> l.contains(" FAIL ")), output);
    }
}
