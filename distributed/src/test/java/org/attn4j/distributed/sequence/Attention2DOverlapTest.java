package org.attn4j.distributed.sequence;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** ATTENTION2D-O on square and rectangular grids of in-JVM workers equals single-device flash attention. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class Attention2DOverlapTest {

    private static final Attention2DChecks.Variant O = (t, grid, n, causal, window) -> grid == null
            ? new Attention2DOverlap(t, n, causal, window) : new Attention2DOverlap(t, grid, n, causal, window);

    @ParameterizedTest(name = "{0}")
    @MethodSource("org.attn4j.distributed.sequence.Attention2DChecks#cases")
    void matchesSingleDeviceAttention(Attention2DChecks.Case c) throws Exception {
        Attention2DChecks.matchesSingleDevice(O, c);
    }

    @Test
    void refusesAGridThatDoesNotHoldEveryWorker() {
        Attention2DChecks.refusesAGridOfAnotherSize(O, "Attention2DOverlap");
    }

    @Test
    void refusesALengthThatIsNotAMultipleOfTheWorkers() {
        Attention2DChecks.refusesALengthThatDoesNotSplit(O, "Attention2DOverlap");
    }

    @Test
    void refusesWrongShardsBeforeSendingAnything() {
        Attention2DChecks.refusesWrongShardsBeforeSending(O, "Attention2DOverlap");
    }
}
