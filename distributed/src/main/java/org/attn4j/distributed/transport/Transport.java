package org.attn4j.distributed.transport;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Point-to-point exchange of ND4J arrays between the ranks of one job. Neither call waits for the peer: a
 * receive returns at once with a future, a send once its bytes are copied out or queued (a transport may copy
 * them on the caller's thread, never waiting on the network to do so). Messages between one (sender, receiver, tag) are delivered in the order sent; a rank
 * may send to itself (delivered locally, not counted in {@link #traffic()}). Arrays of any shape (including
 * zero length and rank 0) travel with their type and shape; FLOAT and DOUBLE are the types the algorithms use,
 * HALF, BFLOAT16, INT and LONG are carried too.
 *
 * <p>Futures complete on a transport completion thread (or on the executor the call names), never on the
 * thread that polls the network, so a continuation attached with {@code thenApply} and friends may compute or
 * even block without stalling delivery; it does occupy a pooled thread while it runs.
 *
 * <p>Failure is never a hang: a future that cannot complete within {@link #timeout()} fails with a
 * {@link TransportException} naming this rank, the peer, the tag and how long it waited; a peer that dies
 * fails every call waiting on it within the timeout ({@link PeerFailedException}).
 */
public interface Transport extends AutoCloseable {

    /** This process's rank, {@code 0 <= rank < worldSize}. */
    int rank();

    /** The number of ranks in the job. */
    int worldSize();

    /**
     * Sends a copy of {@code array} to {@code peer} under {@code tag}. The caller may modify or free
     * {@code array} once the future completes (the bytes have been handed to the wire, or a same-host peer has
     * copied them out of this process); not before, since a transport or the peer may read the array's memory
     * until then: a large array to a same-host peer over Aeron completes once the peer has read it, which it does
     * when its matching receive is posted, or after a few milliseconds into an array of its own. An array not
     * contiguous in C order is copied first.
     *
     * @param peer the receiving rank, {@code 0 <= peer < worldSize}
     * @param tag  a non-negative tag; receives match on (source, tag)
     * @return completes when the bytes are handed over; fails with {@link PeerTimeoutException},
     *         {@link PeerFailedException} or {@link TransportClosedException}
     * @throws IllegalArgumentException for a bad peer, tag or array type (synchronously)
     */
    CompletableFuture<Void> send(int peer, int tag, INDArray array);

    /**
     * Receives the next array that {@code peer} sent under {@code tag}.
     *
     * @param peer the sending rank
     * @param tag  the tag it was sent with
     * @return the array, a new C-ordered array owned by the caller; fails with {@link PeerTimeoutException}
     *         after {@link #timeout()}, with {@link PeerFailedException} when the peer dies or closes first,
     *         with {@link CorruptMessageException} when the matching message arrived damaged, and with
     *         {@link TransportClosedException} when this transport closes
     * @throws IllegalArgumentException for a bad peer or tag (synchronously)
     */
    CompletableFuture<INDArray> receive(int peer, int tag);

    /**
     * Receives the next array that {@code peer} sent under {@code tag} into {@code into}: the message must hold
     * {@code into}'s type and number of elements (its shape may differ; the elements are taken in C order).
     * Where the transport can (an array contiguous in C order, the receive posted before the message arrives) it
     * writes the elements straight into {@code into}, with no array allocated for the message; otherwise it
     * copies them over on delivery. {@code into} must not be read or written until the future completes; after a
     * failure its contents are undefined.
     *
     * @param into the caller's array, e.g. a view of a larger one
     * @return {@code into}, once it holds the message; fails as {@link #receive(int, int)} does, and with a
     *         {@link TransportException} naming both when the message's type or element count differs
     * @throws IllegalArgumentException for a bad peer or tag, or a null array (synchronously)
     */
    default CompletableFuture<INDArray> receive(int peer, int tag, INDArray into) {
        if (into == null) {
            throw new IllegalArgumentException("Transport.receive: the array to receive into is null");
        }
        return receive(peer, tag).thenApply(a -> Mailbox.copyInto(a, into, peer, tag));
    }

    /**
     * As {@link #send(int, int, INDArray)}, the future completing on {@code completion} (or already complete
     * when it returns): for callers whose continuations run on an executor of their own, one thread hand-off
     * fewer than through the transport's completion thread. {@code completion} must hand each task to another
     * thread (it may be called from the thread that polls the network).
     */
    default CompletableFuture<Void> send(int peer, int tag, INDArray array, Executor completion) {
        return TransportThreads.handOff(send(peer, tag, array), completion);
    }

    /**
     * As {@link #receive(int, int, INDArray)} ({@link #receive(int, int)} when {@code into} is null), the future
     * completing on {@code completion} (or already complete when it returns); see
     * {@link #send(int, int, INDArray, Executor)}.
     */
    default CompletableFuture<INDArray> receive(int peer, int tag, INDArray into, Executor completion) {
        return TransportThreads.handOff(into == null ? receive(peer, tag) : receive(peer, tag, into), completion);
    }

    /**
     * Receives the next array that {@code peer} sent under {@code tag} and writes its sum with {@code addend} into
     * {@code into}: {@code into = message + addend}, element by element in C order, as a ring reduce-scatter needs
     * (the partial sum that arrives plus this rank's share). The message must hold {@code into}'s type and number
     * of elements, and {@code addend} holds as many of the same type ({@code addend} may be {@code into} itself:
     * the message is added to it). Where it can (FLOAT or DOUBLE, both arrays contiguous in C order, the receive
     * posted before the message arrives) the transport adds while it reads the message out of its own buffers,
     * the message landing nowhere else; otherwise it receives the message first and adds on delivery. Neither
     * array may be touched until the future completes; after a failure {@code into}'s contents are undefined.
     *
     * @return {@code into}, once it holds the sum; fails as {@link #receive(int, int, INDArray)} does
     * @throws IllegalArgumentException for a bad peer or tag, a null array, or an addend whose type or element
     *                                  count is not {@code into}'s (synchronously)
     */
    default CompletableFuture<INDArray> receiveSum(int peer, int tag, INDArray into, INDArray addend,
                                                   Executor completion) {
        Mailbox.checkAddend(into, addend);
        return receive(peer, tag, null, completion).thenApply(a -> Mailbox.sumInto(a, into, addend, peer, tag));
    }

    /** Bytes this rank has sent, per peer and per tag (payload bytes of arrays, not headers). */
    TrafficCounter traffic();

    /** How long a call may wait before it fails. */
    Duration timeout();

    /**
     * Releases the transport; waiting calls (receives, and sends not yet handed over) fail with
     * {@link TransportClosedException}, and peers learn that this rank has left. Idempotent.
     */
    @Override
    void close();
}
