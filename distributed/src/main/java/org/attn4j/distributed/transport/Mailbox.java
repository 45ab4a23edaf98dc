package org.attn4j.distributed.transport;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.IntConsumer;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The receiving side of one rank, shared by every transport: arrived messages wait for receives and receives wait
 * for messages, matched first-in first-out per (source, tag). It also owns the deadlines of waiting receives and
 * fails them when their peer fails or the transport closes.
 *
 * <p>Thread-safe. Matching happens under one lock; futures complete outside it, on the executor each receive
 * names ({@link TransportThreads}'s completer by default), except a receive that finds its message already
 * there, which completes before it returns (no continuation can be attached yet, so nothing runs on the
 * caller's thread by surprise).
 */
final class Mailbox {

    /** A receive posted before its message arrived. */
    static final class Waiter {
        final int peer;
        final int tag;
        /** Where the caller wants the elements, or null for a new array. */
        final INDArray into;
        /** Added to the message on the way into {@link #into} ({@link Transport#receiveSum}), or null. */
        final INDArray addend;
        final long startNs = System.nanoTime();
        final CompletableFuture<INDArray> future = new CompletableFuture<>();
        /** Where the future completes. */
        final Executor completion;
        ScheduledFuture<?> deadline;
        /**
         * Why a claimed receive must fail (its peer failed), set on any thread; the receive is ended by the
         * receiving thread ({@link #reapAbandoned}, {@link #finishClaimed}), so that its array is never written
         * after the caller was told it failed and may have freed it.
         */
        volatile TransportException abandoned;

        Waiter(int peer, int tag, INDArray into, INDArray addend, Executor completion) {
            this.peer = peer;
            this.tag = tag;
            this.into = into;
            this.addend = addend;
            this.completion = completion;
        }

        /** The caller's array the message is being written into (see {@link #claim}). */
        INDArray into() {
            return into;
        }

        /** What the message is added to on its way into {@link #into()}, or null (a plain copy). */
        INDArray addend() {
            return addend;
        }

        /** The message as it completes this receive: copied into the caller's array, or summed there. */
        INDArray complete(INDArray received) {
            return addend != null ? sumInto(received, into, addend, peer, tag)
                    : into == null || into == received ? received : copyInto(received, into, peer, tag);
        }
    }

    private final int rank;
    private final Duration timeout;
    private final IntConsumer beforeTimeout;
    /** Per (source, tag): arrived arrays, or the {@link TransportException} of a message that arrived damaged. */
    private final Map<Long, ArrayDeque<Object>> arrived = new HashMap<>();
    private final Map<Long, ArrayDeque<Waiter>> waiting = new HashMap<>();
    private final String[] peerFailure;
    private String closedReason;
    /** Receives waiting, written under the lock. */
    private volatile int waiters;
    /** Receives whose message is being written into the caller's array ({@link #claim}). */
    private final Set<Waiter> claimed = new HashSet<>();
    /** Whether a claimed receive was abandoned and waits for {@link #reapAbandoned}. */
    private volatile boolean abandonedDue;
    /** Test hook: run by {@link #receive} between its look for an arrived message and its posting of a waiter. */
    volatile Runnable betweenLooks;

    /**
     * @param rank      the owning rank, for messages
     * @param worldSize the number of ranks
     * @param timeout   how long a receive may wait
     */
    Mailbox(int rank, int worldSize, Duration timeout) {
        this(rank, worldSize, timeout, peer -> { });
    }

    /**
     * As above, {@code beforeTimeout} run (on the timer's thread) when a receive from a peer is about to time
     * out: it may fail that peer ({@link #failPeer}), and the receive fails with it instead.
     */
    Mailbox(int rank, int worldSize, Duration timeout, IntConsumer beforeTimeout) {
        this.rank = rank;
        this.timeout = timeout;
        this.peerFailure = new String[worldSize];
        this.beforeTimeout = beforeTimeout;
    }

    /** The next message from {@code peer} under {@code tag}; see {@link Transport#receive}. */
    CompletableFuture<INDArray> receive(int peer, int tag) {
        return receive(peer, tag, null, TransportThreads.completer());
    }

    /**
     * As {@link #receive(int, int)}, the elements written into {@code into} (null: a new array), the future
     * completing on {@code completion} (or completed at once, when the message is already here); see
     * {@link Transport#receive(int, int, INDArray, Executor)}.
     */
    CompletableFuture<INDArray> receive(int peer, int tag, INDArray into, Executor completion) {
        return receive(peer, tag, into, null, completion);
    }

    /**
     * As {@link #receive(int, int, INDArray, Executor)}, the message added to {@code addend} on its way into
     * {@code into} when {@code addend} is not null; see {@link Transport#receiveSum}.
     */
    CompletableFuture<INDArray> receive(int peer, int tag, INDArray into, INDArray addend, Executor completion) {
        Waiter w;
        Object item = null;
        synchronized (this) {
            if (closedReason != null) {
                return CompletableFuture.failedFuture(closed(peer, tag));
            }
            ArrayDeque<Object> queue = arrived.get(key(peer, tag));
            if (queue != null && !queue.isEmpty()) {
                item = queue.poll();
            } else if (peerFailure[peer] != null) {
                return CompletableFuture.failedFuture(new PeerFailedException(rank, peer, tag, peerFailure[peer]));
            }
        }
        if (item != null) {
            if (!(item instanceof INDArray a)) {
                return CompletableFuture.failedFuture((Throwable) item);
            }
            try {
                return CompletableFuture.completedFuture(new Waiter(peer, tag, into, addend, completion).complete(a));
            } catch (TransportException e) {
                return CompletableFuture.failedFuture(e);
            }
        }
        Runnable hook = betweenLooks;
        if (hook != null) {
            hook.run();
        }
        synchronized (this) {
            if (closedReason != null) {
                return CompletableFuture.failedFuture(closed(peer, tag));
            }
            ArrayDeque<Object> queue = arrived.get(key(peer, tag));
            if (queue != null && !queue.isEmpty()) {
                // Arrived between the two locks: take it as above. Before the peer's failure: a peer that sent its
                // last message and closed at once leaves both here together, the message first.
                return receive(peer, tag, into, addend, completion);
            }
            if (peerFailure[peer] != null) {
                return CompletableFuture.failedFuture(new PeerFailedException(rank, peer, tag, peerFailure[peer]));
            }
            w = new Waiter(peer, tag, into, addend, completion);
            waiting.computeIfAbsent(key(peer, tag), k -> new ArrayDeque<>()).add(w);
            waiters++;
            // Scheduled under the lock so that a delivery cannot complete w before its deadline exists.
            w.deadline = TransportThreads.timer().schedule(() -> expire(w), timeout.toNanos(), TimeUnit.NANOSECONDS);
        }
        return w.future;
    }

    /** Hands an arrived array to the oldest waiting receive, or keeps it for the next one. */
    void deliver(int peer, int tag, INDArray array) {
        offer(peer, tag, array);
    }

    /** Records that the next message from {@code peer} under {@code tag} arrived damaged. */
    void deliverFailure(int peer, int tag, TransportException failure) {
        offer(peer, tag, failure);
    }

    private void offer(int peer, int tag, Object item) {
        Waiter w;
        synchronized (this) {
            if (closedReason != null) {
                return;
            }
            ArrayDeque<Waiter> queue = waiting.get(key(peer, tag));
            w = queue == null ? null : queue.poll();
            if (w == null) {
                arrived.computeIfAbsent(key(peer, tag), k -> new ArrayDeque<>()).add(item);
                return;
            }
            w.deadline.cancel(false);
            waiters--;
        }
        Waiter matched = w;
        if (item instanceof INDArray a) {
            TransportThreads.complete(matched.completion, () -> {
                try {
                    matched.future.complete(matched.complete(a));
                } catch (TransportException e) {
                    matched.future.completeExceptionally(e);
                }
            });
        } else {
            TransportThreads.complete(matched.completion, () -> matched.future.completeExceptionally((Throwable) item));
        }
    }

    /**
     * Marks {@code peer} failed: its waiting receives fail now, later receives fail at once unless a message from
     * it is already here. The first reason sticks.
     *
     * @return whether this call marked it (false if it was already failed or the mailbox is closed)
     */
    boolean failPeer(int peer, String reason) {
        List<Waiter> failed = new ArrayList<>();
        synchronized (this) {
            if (closedReason != null || peerFailure[peer] != null) {
                return false;
            }
            peerFailure[peer] = reason;
            for (Iterator<ArrayDeque<Waiter>> it = waiting.values().iterator(); it.hasNext(); ) {
                ArrayDeque<Waiter> queue = it.next();
                if (!queue.isEmpty() && queue.peek().peer == peer) {
                    failed.addAll(queue);
                    waiters -= queue.size();
                    it.remove();
                }
            }
            for (Waiter w : claimed) {
                if (w.peer == peer) {
                    w.abandoned = new PeerFailedException(rank, peer, w.tag, reason);
                    abandonedDue = true;
                }
            }
        }
        for (Waiter w : failed) {
            w.deadline.cancel(false);
            TransportThreads.complete(w.completion, () -> w.future.completeExceptionally(
                    new PeerFailedException(rank, peer, w.tag, reason)));
        }
        return true;
    }

    /**
     * Takes the oldest receive waiting for {@code peer}'s next message under {@code tag} if it gave an array the
     * message can be written into directly (same type and element count, elements contiguous in C order): the
     * receiver then writes straight into it and ends the receive with {@link #finishClaimed}. Null otherwise (the
     * message goes into a new array and is copied over on delivery). The receive no longer times out: the
     * message is under way, and a peer that stops mid-message is failed by the liveness check.
     */
    Waiter claim(int peer, int tag, DataType type, long length) {
        synchronized (this) {
            ArrayDeque<Waiter> queue = waiting.get(key(peer, tag));
            Waiter w = queue == null ? null : queue.peek();
            if (w == null || w.into == null || w.into.dataType() != type || w.into.length() != length
                    || w.into.wasClosed() || !Contiguity.isCContiguous(w.into)) {
                return null;
            }
            if (w.addend != null && (type != DataType.FLOAT && type != DataType.DOUBLE || w.addend.wasClosed()
                    || !Contiguity.isCContiguous(w.addend))) {
                return null;                             // summed on delivery instead
            }
            queue.poll();
            waiters--;
            w.deadline.cancel(false);
            claimed.add(w);
            return w;
        }
    }

    /**
     * Fails the claimed receives whose peer failed ({@link Waiter#abandoned}); called by the thread that writes
     * claimed receives, between its writes.
     */
    void reapAbandoned() {
        if (!abandonedDue) {
            return;
        }
        List<Waiter> reaped = new ArrayList<>();
        synchronized (this) {
            abandonedDue = false;
            for (Iterator<Waiter> it = claimed.iterator(); it.hasNext(); ) {
                Waiter w = it.next();
                if (w.abandoned != null) {
                    reaped.add(w);
                    it.remove();
                }
            }
        }
        for (Waiter w : reaped) {
            TransportThreads.complete(w.completion, () -> w.future.completeExceptionally(w.abandoned));
        }
    }

    /** Ends a claimed receive: with its array, or with {@code failure} (or the peer's, if it failed meanwhile). */
    void finishClaimed(Waiter w, TransportException failure) {
        synchronized (this) {
            if (!claimed.remove(w)) {
                return;                                  // failed already (reaped, or the mailbox closed)
            }
        }
        TransportException why = w.abandoned != null ? w.abandoned : failure;
        TransportThreads.complete(w.completion, () -> {
            if (why == null) {
                w.future.complete(w.into);
            } else {
                w.future.completeExceptionally(why);
            }
        });
    }

    /**
     * Copies a received array into the caller's, checking type and element count.
     *
     * @throws TransportException naming what the receive expected and what came
     */
    static INDArray copyInto(INDArray received, INDArray into, int peer, int tag) {
        if (received.dataType() != into.dataType() || received.length() != into.length()) {
            throw new TransportException("receive from rank " + peer + " with tag " + tag + " into an array of "
                    + into.length() + " " + into.dataType() + ": the message holds " + received.length() + " "
                    + received.dataType());
        }
        ArrayCopy.copy(received, into);
        received.close();
        return into;
    }

    /**
     * Writes {@code received + addend} into {@code into}, checking the message's type and element count as
     * {@link #copyInto} does; {@code received} is closed.
     */
    static INDArray sumInto(INDArray received, INDArray into, INDArray addend, int peer, int tag) {
        if (received.dataType() != into.dataType() || received.length() != into.length()) {
            throw new TransportException("receive from rank " + peer + " with tag " + tag + " into an array of "
                    + into.length() + " " + into.dataType() + ": the message holds " + received.length() + " "
                    + received.dataType());
        }
        if (received.length() > 0) {
            INDArray message = received.reshape('c', into.shape());
            if (addend == into) {
                into.addi(message);
            } else {
                message.add(addend.reshape('c', into.shape()), into);      // one pass: the sum written into place
            }
        }
        received.close();
        return into;
    }

    /**
     * Checks the arrays of a {@link Transport#receiveSum}.
     *
     * @throws IllegalArgumentException for a null array, or an addend whose type or element count is not
     *                                  {@code into}'s
     */
    static void checkAddend(INDArray into, INDArray addend) {
        if (into == null || addend == null) {
            throw new IllegalArgumentException("Transport.receiveSum: the " + (into == null ? "array to receive into"
                    : "addend") + " is null");
        }
        if (addend.dataType() != into.dataType() || addend.length() != into.length()) {
            throw new IllegalArgumentException("Transport.receiveSum: the addend holds " + addend.length() + " "
                    + addend.dataType() + ", expected " + into.length() + " " + into.dataType()
                    + " as the array to receive into");
        }
    }

    /** Whether a receive waits for {@code peer}'s next message under {@code tag}. */
    synchronized boolean awaits(int peer, int tag) {
        ArrayDeque<Waiter> queue = waiting.get(key(peer, tag));
        return queue != null && !queue.isEmpty();
    }

    /** Whether a receive is waiting for its message; any thread, no lock. */
    boolean hasWaiting() {
        return waiters > 0;
    }

    /** Why {@code peer} failed, or null while it is alive. */
    synchronized String peerFailure(int peer) {
        return peerFailure[peer];
    }

    /** Fails every waiting receive with {@link TransportClosedException}; later receives fail at once. */
    void close(String reason) {
        List<Waiter> failed = new ArrayList<>();
        synchronized (this) {
            if (closedReason != null) {
                return;
            }
            closedReason = reason;
            waiting.values().forEach(failed::addAll);
            waiting.clear();
            waiters = 0;
            failed.addAll(claimed);
            claimed.clear();
            arrived.clear();
        }
        for (Waiter w : failed) {
            w.deadline.cancel(false);
            TransportThreads.complete(w.completion, () -> w.future.completeExceptionally(closed(w.peer, w.tag)));
        }
    }

    private void expire(Waiter w) {
        beforeTimeout.accept(w.peer);
        synchronized (this) {
            ArrayDeque<Waiter> queue = waiting.get(key(w.peer, w.tag));
            if (queue == null || !queue.remove(w)) {
                return;
            }
            waiters--;
        }
        Duration waited = Duration.ofNanos(System.nanoTime() - w.startNs);
        TransportThreads.complete(w.completion, () -> w.future.completeExceptionally(
                new PeerTimeoutException(rank, w.peer, w.tag, waited, "receive")));
    }

    private TransportClosedException closed(int peer, int tag) {
        return new TransportClosedException("rank " + rank + ": receive from rank " + peer + " with tag " + tag
                + " failed: transport " + closedReason);
    }

    private static long key(int peer, int tag) {
        return ((long) peer << 32) | (tag & 0xFFFF_FFFFL);
    }
}
