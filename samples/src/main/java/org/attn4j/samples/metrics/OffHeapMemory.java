package org.attn4j.samples.metrics;

import java.lang.management.ManagementFactory;

/**
 * What this JVM holds off the Java heap, as the operating system counts it: the process's resident anonymous
 * memory ({@code RssAnon} in {@code /proc/self/status}) minus the Java heap's committed bytes. ND4J 1.0.0-M2.1
 * allocates its arrays where no counter of its own or of javacpp sees them ({@code Pointer.totalBytes()} stays
 * at a few kilobytes), so the resident set is the only honest reading. Memory-mapped files (Aeron's log buffers,
 * shared libraries) are not anonymous and so not counted; direct byte buffers, thread stacks and the JVM's
 * metaspace are.
 *
 * <p>The subtraction is exact only when the whole committed heap is resident: run with {@code -Xms} equal to
 * {@code -Xmx} and {@code -XX:+AlwaysPreTouch}, as {@code attn4j bench zero} starts its workers.
 */
public final class OffHeapMemory {

    private OffHeapMemory() {
    }

    /**
     * The least of {@code readings} readings {@link #afterGarbageCollection() after garbage collection}, one a second:
     * what a process at rest holds. Transient native memory of the JVM itself (the JIT compiler's arenas, which
     * HotSpot hands back every few seconds) only ever adds to a reading, never takes away.
     */
    public static long atRest(int readings) throws InterruptedException {
        long least = Long.MAX_VALUE;
        for (int i = 0; i < readings; i++) {
            if (i > 0) {
                Thread.sleep(1000);
            }
            least = Math.min(least, afterGarbageCollection());
        }
        return least;
    }

    /**
     * Collects garbage first (so unreachable ND4J buffers are freed and glibc returns free memory), then reads.
     *
     * @return resident anonymous bytes minus the committed heap, or -1 where {@code /proc/self/status} has no
     *         {@code RssAnon} (not Linux)
     */
    public static long afterGarbageCollection() {
        for (int i = 0; i < 3; i++) {
            PeakMemory.collectGarbage();
            try {
                Thread.sleep(100);            // ND4J's deallocator thread frees native buffers after the collection
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        PeakMemory.collectGarbage();
        long anonKb = PeakMemory.readStatusKb("RssAnon");
        if (anonKb <= 0) {
            return -1;
        }
        return anonKb * 1024 - ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getCommitted();
    }
}
