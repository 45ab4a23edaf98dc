package org.attn4j.distributed.collective;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Iterator;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The arrays a communicator's sliced reduce-scatters hold their middle steps' partial sums in, kept for the next
 * call instead of freed. A fresh array costs more than the sum written into it: ND4J clears every new array, and
 * glibc hands a freed block of many megabytes back to the kernel, so the next call faults its pages in again (two
 * 16 MB arrays made and closed took about 15 ms on the benchmark machine, where a P = 4 reduce-scatter of 64 MB
 * across network namespaces takes about 100 ms). At most {@link #RETAINED_BYTES} are kept; beyond that the
 * arrays kept longest are freed first. Thread-safe.
 */
final class ScratchBlocks {

    /** The most bytes kept between calls per communicator. */
    static final long RETAINED_BYTES = 64L << 20;

    private final Deque<INDArray> free = new ArrayDeque<>();
    private long retained;

    /** A kept array of {@code n} elements of {@code type}, or a new one; its contents are undefined. */
    INDArray take(DataType type, long n) {
        synchronized (this) {
            for (Iterator<INDArray> it = free.iterator(); it.hasNext(); ) {
                INDArray a = it.next();
                if (a.dataType() == type && a.length() == n) {
                    it.remove();
                    retained -= bytes(a);
                    return a;
                }
            }
        }
        // Outside any workspace: the array outlives the caller's scope.
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            return Nd4j.createUninitialized(type, n);
        }
    }

    /** Keeps {@code a} (taken from here, no longer in use) for a later {@link #take}, or frees it. */
    void give(INDArray a) {
        long b = bytes(a);
        if (b > RETAINED_BYTES) {
            a.close();
            return;
        }
        synchronized (this) {
            while (retained + b > RETAINED_BYTES) {
                INDArray old = free.removeFirst();
                retained -= bytes(old);
                old.close();
            }
            free.addLast(a);
            retained += b;
        }
    }

    /** Bytes kept now. */
    synchronized long retained() {
        return retained;
    }

    private static long bytes(INDArray a) {
        return a.length() * a.dataType().width();
    }
}
