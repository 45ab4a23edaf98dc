package org.attn4j.distributed.collective;

import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.LongSupplier;

/**
 * A collective in flight: start it, compute, then {@link #join()} (double buffering). Completes when this rank's
 * part is done: every array it expects has arrived and every send has been handed to the transport, so the
 * caller may then reuse its input arrays.
 *
 * @param <T> the result type
 */
public final class CollectiveHandle<T> {

    private final String description;
    private final CompletableFuture<T> future;
    private final LongSupplier bytesSent;

    CollectiveHandle(String description, CompletableFuture<T> future, LongSupplier bytesSent) {
        this.description = description;
        this.future = future;
        this.bytesSent = bytesSent;
    }

    /**
     * Waits for the result (blocking the calling thread, never spinning).
     *
     * @throws CollectiveException naming the collective, the group, the peer and the tag, if this rank's part
     *                             failed (a peer died or timed out, the transport closed, the reduction refused)
     */
    public T join() {
        try {
            return future.join();
        } catch (CompletionException | CancellationException e) {
            Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
            // A fresh exception, so the stack shows the waiting caller; the transport's exception stays the cause.
            CollectiveException thrown = new CollectiveException(cause.getMessage(),
                    cause instanceof CollectiveException && cause.getCause() != null ? cause.getCause() : cause);
            if (cause instanceof CollectiveException) {
                thrown.addSuppressed(cause);
            }
            throw thrown;
        }
    }

    /** Whether the collective has completed, normally or not. */
    public boolean isDone() {
        return future.isDone();
    }

    /** The underlying future; fails with a {@link CollectiveException}. */
    public CompletableFuture<T> future() {
        return future;
    }

    /**
     * Payload bytes this rank has sent in this call so far (the same bytes the transport's
     * {@link org.attn4j.distributed.transport.TrafficCounter} counts); final once {@link #isDone()}.
     */
    public long bytesSent() {
        return bytesSent.getAsLong();
    }

    /** E.g. "allGather call 7 (channel 0) on group [0, 1, 2] (rank 1 at index 1)". */
    public String description() {
        return description;
    }

    @Override
    public String toString() {
        return description + (future.isDone() ? (future.isCompletedExceptionally() ? " (failed)" : " (done)")
                : " (in flight)");
    }
}
