package org.attn4j.distributed.collective;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;

import org.attn4j.distributed.transport.PeerFailedException;
import org.attn4j.distributed.transport.Transport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * One call of a collective: its tags, the sends it posted, its byte count, and its result, which fails at the
 * first failed send or receive (so a dead peer surfaces at once, not after the rest of the schedule) or when
 * another member reports a failure ({@link FailureNotices}). Continuations after a receive (the schedule's
 * next step, the reduction) run on the communicator's executor, not on the transport's completion threads.
 *
 * @param <T> the result type
 */
final class Exchange<T> {

    private final Transport transport;
    private final Group group;
    private final int channel;
    private final long call;
    private final Executor executor;
    private final String description;
    private final LongAdder bytesSent = new LongAdder();
    private final LongAdder communicatorBytes;
    private final List<CompletableFuture<Void>> sends = new ArrayList<>();
    private final CompletableFuture<T> result = new CompletableFuture<>();
    private final AtomicBoolean failing = new AtomicBoolean();
    private final Function<Throwable, CompletableFuture<Void>> notify;
    private final ScratchBlocks scratch;

    Exchange(Transport transport, Group group, int channel, long call, Executor executor, LongAdder communicatorBytes,
             Function<Throwable, CompletableFuture<Void>> notify, String description, ScratchBlocks scratch) {
        this.transport = transport;
        this.group = group;
        this.channel = channel;
        this.call = call;
        this.executor = executor;
        this.communicatorBytes = communicatorBytes;
        this.notify = notify;
        this.description = description;
        this.scratch = scratch;
    }

    Group group() {
        return group;
    }

    String description() {
        return description;
    }

    LongAdder bytesSent() {
        return bytesSent;
    }

    CompletableFuture<T> result() {
        return result;
    }

    /** Sends {@code array} to the member at {@code index} under this call's tag for {@code phase}. */
    CompletableFuture<Void> send(int index, int phase, INDArray array) {
        if (result.isDone()) {
            return CompletableFuture.failedFuture(new IllegalStateException(description + " already failed"));
        }
        int peer = group.rank(index);
        CompletableFuture<Void> f = transport.send(peer, CollectiveTags.tag(channel, call, phase), array, executor);
        if (peer != transport.rank()) {
            // Counted as the transport counts: payload bytes, sends to self excluded.
            long bytes = array.length() * array.dataType().width();
            bytesSent.add(bytes);
            communicatorBytes.add(bytes);
        }
        synchronized (sends) {
            sends.add(f);
        }
        f.whenComplete((v, e) -> {
            if (e != null) {
                fail(e);
            }
        });
        return f;
    }

    /** Sends the arrays of a tuple one after the other (received in the same order: one tag is FIFO). */
    CompletableFuture<Void> sendAll(int index, int phase, INDArray[] tuple) {
        CompletableFuture<?>[] f = new CompletableFuture<?>[tuple.length];
        for (int k = 0; k < tuple.length; k++) {
            f[k] = send(index, phase, tuple[k]);
        }
        return CompletableFuture.allOf(f);
    }

    /** Receives the next array from the member at {@code index}; completes on the executor. */
    CompletableFuture<INDArray> receive(int index, int phase) {
        if (result.isDone()) {
            return CompletableFuture.failedFuture(new IllegalStateException(description + " already failed"));
        }
        return receiveInto(index, phase, null);
    }

    /**
     * Receives the next array from the member at {@code index} into {@code into} (see
     * {@link Transport#receive(int, int, INDArray)}); completes on the executor.
     */
    CompletableFuture<INDArray> receiveInto(int index, int phase, INDArray into) {
        if (result.isDone()) {
            return CompletableFuture.failedFuture(new IllegalStateException(description + " already failed"));
        }
        return tracked(transport.receive(group.rank(index), CollectiveTags.tag(channel, call, phase), into,
                executor));
    }

    /**
     * A receive of this call: its failure fails the call. It completes on this call's executor straight from the
     * transport; a message that was already there completes at once, and its continuations are handed to the
     * executor too (not run by the caller).
     */
    private CompletableFuture<INDArray> tracked(CompletableFuture<INDArray> f) {
        f.whenComplete((v, e) -> {
            if (e != null) {
                fail(e);
            }
        });
        return f.isDone() ? f.thenApplyAsync(Function.identity(), executor) : f;
    }

    /**
     * Receives the next array from the member at {@code index} and writes its sum with {@code addend} into
     * {@code into} (see {@link Transport#receiveSum}); completes on the executor.
     */
    CompletableFuture<INDArray> receiveSum(int index, int phase, INDArray into, INDArray addend) {
        if (result.isDone()) {
            return CompletableFuture.failedFuture(new IllegalStateException(description + " already failed"));
        }
        return tracked(transport.receiveSum(group.rank(index), CollectiveTags.tag(channel, call, phase), into, addend,
                executor));
    }

    /** Receives a tuple of {@code count} arrays, posting each receive after the previous one completed. */
    CompletableFuture<INDArray[]> receiveAll(int index, int phase, int count) {
        INDArray[] tuple = new INDArray[count];
        CompletableFuture<Void> chain = CompletableFuture.completedFuture(null);
        for (int k = 0; k < count; k++) {
            int slot = k;
            chain = chain.thenCompose(v -> receive(index, phase).thenAccept(a -> tuple[slot] = a));
        }
        return chain.thenApply(v -> tuple);
    }

    /** Completes once every send posted so far has completed, or fails with the first that failed. */
    CompletableFuture<Void> afterSends() {
        CompletableFuture<?>[] posted;
        synchronized (sends) {
            posted = sends.toArray(new CompletableFuture<?>[0]);
        }
        return CompletableFuture.allOf(posted);
    }

    /**
     * Closes {@code arrays} once every send posted so far has completed or failed: the transport may read an
     * array's memory until its send completes.
     */
    void closeAfterSends(List<INDArray> arrays) {
        afterSends().whenComplete((v, e) -> arrays.forEach(INDArray::close));
    }

    /**
     * A scratch array of {@code n} elements of {@code type} from the communicator's kept ones (contents undefined);
     * handed back with {@link #keepAfterSends} once the call no longer uses it.
     */
    INDArray scratch(DataType type, long n) {
        return scratch.take(type, n);
    }

    /**
     * Hands {@code arrays} (from {@link #scratch}) back to the communicator once every send posted so far has
     * completed: the transport may read an array's memory until its send completes. Only after the call
     * succeeded: a failed call may leave a receive posted into one.
     */
    void keepAfterSends(List<INDArray> arrays) {
        afterSends().whenComplete((v, e) -> {
            if (e == null) {
                arrays.forEach(scratch::give);
            }
        });
    }

    /**
     * Completes the result with the schedule's value once every send posted so far has completed too, or with
     * the first failure.
     */
    CompletableFuture<T> finish(CompletableFuture<T> schedule) {
        schedule.whenComplete((value, e) -> {
            if (e != null) {
                fail(e);
                return;
            }
            afterSends().whenComplete((v, e2) -> {
                if (e2 != null) {
                    fail(e2);
                } else {
                    result.complete(value);
                }
            });
        });
        return result;
    }

    /**
     * How long a call that lost a member to a clean close waits for a notice naming the real failure: on a loaded
     * machine (two cores, a dozen JVMs) the notice was seen to arrive more than a second after the goodbye. Only a
     * failing call waits.
     */
    private static final long LEFT_GRACE_MS = 3000;

    /**
     * Fails the call with the first failure, the message prefixed with what this call was. A transport failure
     * naming a member is first passed to {@code notify} (which tells the other members and fails this rank's
     * other calls) and the call fails once that is done, so a worker that exits on the exception has already
     * spread the news.
     */
    void fail(Throwable e) {
        Throwable cause = e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
        if (result.isDone()) {
            return;
        }
        CollectiveException failure = cause instanceof CollectiveException c ? c
                : new CollectiveException(description + ": " + cause.getMessage(), cause);
        if (cause instanceof PeerFailedException left && left.peerClosed()) {
            // A member that closes mid-collective is usually leaving because another member failed, and it sent
            // the notice naming that member just before its goodbye. The goodbye can overtake the notice here
            // (notices are handled on a pool thread), so wait briefly: a notice that arrives fails this call first
            // (failQuietly), naming the member that really failed. The call is not marked failing meanwhile, not
            // even for an instant: a notice arriving then would be dropped.
            CompletableFuture.delayedExecutor(LEFT_GRACE_MS, java.util.concurrent.TimeUnit.MILLISECONDS)
                    .execute(() -> {
                        if (failing.compareAndSet(false, true)) {
                            result.completeExceptionally(failure);
                        }
                    });
            return;
        }
        if (!failing.compareAndSet(false, true)) {
            return;
        }
        CompletableFuture<Void> told;
        try {
            told = notify.apply(cause);
        } catch (RuntimeException notTold) {
            told = CompletableFuture.completedFuture(null);
        }
        told.whenComplete((v, ignored) -> result.completeExceptionally(failure));
    }

    /** Fails the call without telling anyone (the news came from another member). */
    void failQuietly(Throwable cause) {
        if (!result.isDone() && failing.compareAndSet(false, true)) {
            result.completeExceptionally(new CollectiveException(description + ": " + cause.getMessage(), cause));
        }
    }
}
