package org.attn4j.distributed.sequence;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** ATTENTION2D-NO on square and rectangular grids of in-JVM workers equals single-device flash attention. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class Attention2DTest {

    private static final Attention2DChecks.Variant NO = (t, grid, n, causal, window) -> grid == null
            ? new Attention2D(t, n, causal, window) : new Attention2D(t, grid, n, causal, window);

    @ParameterizedTest(name = "{0}")
    @MethodSource("org.attn4j.distributed.sequence.Attention2DChecks#cases")
    void matchesSingleDeviceAttention(Attention2DChecks.Case c) throws Exception {
        Attention2DChecks.matchesSingleDevice(NO, c);
    }

    @Test
    void refusesAGridThatDoesNotHoldEveryWorker() {
        Attention2DChecks.refusesAGridOfAnotherSize(NO, "Attention2D");
    }

    @Test
    void refusesALengthThatIsNotAMultipleOfTheWorkers() {
        Attention2DChecks.refusesALengthThatDoesNotSplit(NO, "Attention2D");
    }

    @Test
    void refusesWrongShardsBeforeSendingAnything() {
        Attention2DChecks.refusesWrongShardsBeforeSending(NO, "Attention2D");
    }
}
