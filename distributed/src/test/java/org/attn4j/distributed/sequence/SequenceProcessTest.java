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

/**
 * The conformance contract over Aeron: every listed algorithm, in real worker processes ({@link SequenceWorker}),
 * causal and full, equals the single-device op to 1e-12 and sends exactly its formula's bytes, on every rank.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class SequenceProcessTest {

    @ParameterizedTest(name = "P={0}")
    @ValueSource(ints = {2, 3, 4, 8})
    void everyAlgorithmMatchesSingleDeviceAttentionInRealProcesses(int p) throws Exception {
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(p, SequenceWorker.class.getName()).heap("512m")
                .timeout(Duration.ofSeconds(150)).output(out::add, out::add).env("ATTN4J_TIMEOUT_MS", "30000")
                .build().run();
        String output = String.join("\n", out);
        assertEquals(0, r.exitCode(), r + "\n" + output);
        int checked = 0;
        for (SequenceAlgorithm a : SequenceAlgorithm.all()) {
            for (boolean causal : new boolean[] {true, false}) {
                SequenceAlgorithm.Settings plain = SequenceAlgorithm.Settings.of(p, 48, causal).withHeads(12, 6);
                SequenceAlgorithm.Settings s = a.softmax() || !causal ? plain : plain.withOption("decay", 0.9);
                try {
                    a.validate(s);
                } catch (IllegalArgumentException e) {
                    continue;
                }
                String name = a.name() + "/" + (causal ? "causal" : "full");
                long ok = out.stream().filter(l -> l.contains("VERDICT " + name + " OK")).count();
                assertEquals(p, ok, name + ": every rank must report OK\n" + output);
                checked++;
            }
        }
        assertTrue(checked >= 2 * SequenceAlgorithm.all().size() - 2, checked + " configurations checked");
        assertTrue(out.stream().noneMatch(l -> l.contains(" FAIL ")), output);
    }
}
