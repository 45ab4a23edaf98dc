package org.attn4j.distributed.transport;

import java.util.concurrent.locks.LockSupport;

import org.agrona.concurrent.IdleStrategy;

/**
 * Idles a polling thread without holding a core: a few yields, then short parks while work was seen recently
 * (so a burst of messages, such as the steps of a ring, passes with little added latency), then long parks once
 * the thread has been quiet for a while (so idle ranks cost next to nothing). Agrona's {@code BackoffIdleStrategy}
 * reaches its longest park within about two milliseconds of idling, which puts up to that park on every hop of a
 * ping-pong; busy spinning is not an option on a machine whose cores are shared.
 */
final class AdaptiveIdleStrategy implements IdleStrategy {

    private static final int YIELDS = 20;

    private final long shortParkNs;
    private final long longParkNs;
    private final long warmNs;
    private long lastWorkNs;
    private int yields;

    /**
     * @param shortParkNs the park while warm
     * @param longParkNs  the park once cold
     * @param warmNs      how long after the last work the thread stays warm
     */
    AdaptiveIdleStrategy(long shortParkNs, long longParkNs, long warmNs) {
        this.shortParkNs = Math.min(shortParkNs, longParkNs);
        this.longParkNs = longParkNs;
        this.warmNs = warmNs;
        this.lastWorkNs = System.nanoTime();
    }

    /** For transport threads: short parks of 50 us for 50 ms after work, then parks of {@code longParkNs}. */
    static AdaptiveIdleStrategy withLongPark(long longParkNs) {
        return new AdaptiveIdleStrategy(50_000, longParkNs, 50_000_000);
    }

    /**
     * For an embedded media driver: warm for only 5 ms, since the driver works every 100 ms or so on its own
     * (its heartbeats and status messages) and would otherwise never cool down.
     */
    static AdaptiveIdleStrategy forDriver(long longParkNs) {
        return new AdaptiveIdleStrategy(50_000, longParkNs, 5_000_000);
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            lastWorkNs = System.nanoTime();
            yields = 0;
        } else {
            idle();
        }
    }

    @Override
    public void idle() {
        if (yields < YIELDS) {
            yields++;
            Thread.yield();
            return;
        }
        boolean warm = System.nanoTime() - lastWorkNs < warmNs;
        LockSupport.parkNanos(warm ? shortParkNs : longParkNs);
    }

    @Override
    public void reset() {
        yields = 0;
    }

    @Override
    public String alias() {
        return "attn4j-adaptive";
    }
}
