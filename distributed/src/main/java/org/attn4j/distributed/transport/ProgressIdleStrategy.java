package org.attn4j.distributed.transport;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

import org.agrona.concurrent.IdleStrategy;

/**
 * How an {@link AeronTransport}'s one progress thread waits between duty cycles. While a call is outstanding (a
 * send queued or a receive posted) and the link made progress within the last {@value #HOT_WINDOW_US} us, it
 * spins or yields ({@link AeronTransportContext.ProgressIdle}), so a message is picked up within microseconds;
 * once that long passes without progress (the peer is computing, not sending) it falls back to
 * {@link AdaptiveIdleStrategy}'s short then long parks, so a rank waiting for a slow peer does not take a core
 * from its own compute. With nothing outstanding it parks up to the longest park. A new call wakes the thread
 * and restarts the hot window ({@link #kick}).
 */
final class ProgressIdleStrategy implements IdleStrategy {

    /** How long after the last progress (or call) the thread stays hot, microseconds. */
    static final long HOT_WINDOW_US = 2_000;

    private final AeronTransportContext.ProgressIdle mode;
    private final BooleanSupplier outstanding;
    private final AdaptiveIdleStrategy backoff;
    private final long longParkNs;
    private volatile boolean kicked;
    private long hotUntilNs;

    /**
     * @param mode        how to wait while hot
     * @param outstanding whether a call is outstanding; read on the progress thread
     * @param longParkNs  the longest park
     */
    ProgressIdleStrategy(AeronTransportContext.ProgressIdle mode, BooleanSupplier outstanding, long longParkNs) {
        this.mode = mode;
        this.outstanding = outstanding;
        this.backoff = AdaptiveIdleStrategy.withLongPark(longParkNs);
        this.longParkNs = longParkNs;
    }

    /** A call was made: the thread is woken by the caller and stays hot for the window. Any thread. */
    void kick() {
        kicked = true;
    }

    @Override
    public void idle(int workCount) {
        long now = System.nanoTime();
        if (workCount > 0 || kicked) {
            kicked = false;
            hotUntilNs = now + HOT_WINDOW_US * 1_000;
            backoff.idle(1);
            if (workCount > 0) {
                return;
            }
        }
        if (!outstanding.getAsBoolean()) {
            LockSupport.parkNanos(longParkNs);
            return;
        }
        if (now - hotUntilNs < 0 && mode != AeronTransportContext.ProgressIdle.PARK) {
            if (mode == AeronTransportContext.ProgressIdle.SPIN) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
            return;
        }
        backoff.idle();
    }

    @Override
    public void idle() {
        idle(0);
    }

    @Override
    public void reset() {
        backoff.reset();
    }

    @Override
    public String alias() {
        return "attn4j-progress";
    }
}
