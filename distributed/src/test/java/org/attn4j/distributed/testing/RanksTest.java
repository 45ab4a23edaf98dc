package org.attn4j.distributed.testing;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

/** The test harness itself: no rank of a run outlives the {@link Ranks} it ran on. */
class RanksTest {

    @Test
    void closeWaitsForTheRanksOfAFailedRunToEnd() {
        AtomicBoolean slowRankEnded = new AtomicBoolean();
        try (Ranks ranks = Ranks.inJvm(2, Duration.ofSeconds(5))) {
            assertThrows(ExecutionException.class, () -> ranks.run(Duration.ofSeconds(10), t -> {
                if (t.rank() == 0) {
                    throw new IllegalStateException("rank 0 fails at once");
                }
                // Rank 1 works on without heeding interrupts, as a rank in the middle of a computation does.
                long until = System.nanoTime() + 300_000_000L;
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
                slowRankEnded.set(true);
                return null;
            }));
        }
        assertTrue(slowRankEnded.get(), "rank 1 was still running when its Ranks closed");
    }
}
