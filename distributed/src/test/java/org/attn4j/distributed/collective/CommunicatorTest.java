package org.attn4j.distributed.collective;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * Every collective on P = 1..4 in-JVM ranks against the single-process answer, float32 and float64
 * ({@link CollectiveChecks}; {@link CommunicatorProcessTest} runs the same checks in real processes over Aeron).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CommunicatorTest {

    @TempDir
    Path tmp;

    static Stream<Arguments> checks() {
        List<Arguments> a = new ArrayList<>();
        for (CollectiveChecks check : CollectiveChecks.values()) {
            for (int p = 1; p <= 4; p++) {
                a.add(Arguments.of(check, p, DataType.FLOAT));
                a.add(Arguments.of(check, p, DataType.DOUBLE));
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0} P={1} {2}")
    @MethodSource("checks")
    void matchesTheSingleProcessAnswer(CollectiveChecks check, int p, DataType type) throws Exception {
        Path scratch = Files.createDirectories(tmp.resolve(check + "-" + p + "-" + type));
        Ranks.runInJvm(p, Duration.ofSeconds(5), Duration.ofSeconds(30), t -> {
            check.run(t, type, scratch);
            return null;
        });
    }

    /**
     * The same checks over the Aeron transport (UDP loopback, one media driver per rank, all in this JVM), one
     * group of transports per P running every check in both types; real processes: {@link CommunicatorProcessTest}.
     */
    @ParameterizedTest(name = "Aeron P={0}")
    @org.junit.jupiter.params.provider.ValueSource(ints = {1, 2, 3, 4})
    void matchesTheSingleProcessAnswerOverAeron(int p) throws Exception {
        try (Ranks ranks = Ranks.aeron(p, Duration.ofSeconds(10))) {
            ranks.run(Duration.ofSeconds(30), t -> {
                for (CollectiveChecks check : CollectiveChecks.values()) {
                    for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE}) {
                        Path dir = tmp.resolve("aeron-" + check + "-" + p + "-" + type);
                        check.run(t, type, Files.createDirectories(dir));
                    }
                }
                return null;
            });
        }
    }
}
