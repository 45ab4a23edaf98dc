package org.attn4j.distributed.transport;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * P ranks inside one JVM, for fast unit tests of everything built on {@link Transport}. A send copies the array
 * at once (so the sender may reuse its buffer as soon as {@code send} returns) and hands the copy to the
 * receiver's mailbox; the returned future is already complete. Receives, timeouts, peer failure and close behave
 * as in {@link AeronTransport}, so the same conformance suite runs against both.
 *
 * <p>{@link #kill()} simulates a crashed rank: the others' waiting receives on it fail at once with
 * {@link PeerFailedException}, as Aeron's failure detection would after a delay.
 */
public final class InJvmTransport implements Transport {

    /** The members of one group; every member holds the same instance. */
    private static final class Group {
        final List<InJvmTransport> members = new ArrayList<>();
    }

    private final Group group;
    private final int rank;
    private final int worldSize;
    private final Duration timeout;
    private final Mailbox mailbox;
    private final TrafficCounter traffic = new TrafficCounter();
    private final AtomicBoolean closed = new AtomicBoolean();

    private InJvmTransport(Group group, int rank, int worldSize, Duration timeout) {
        this.group = group;
        this.rank = rank;
        this.worldSize = worldSize;
        this.timeout = timeout;
        this.mailbox = new Mailbox(rank, worldSize, timeout);
    }

    /**
     * Creates the ranks of one in-JVM job.
     *
     * @param worldSize the number of ranks, at least 1
     * @param timeout   how long a receive may wait, positive
     * @return one transport per rank, index = rank
     * @throws IllegalArgumentException for a world size below 1 or a non-positive timeout
     */
    public static List<InJvmTransport> group(int worldSize, Duration timeout) {
        if (worldSize < 1) {
            throw new IllegalArgumentException("InJvmTransport: world size is " + worldSize + "; it must be >= 1");
        }
        if (timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("InJvmTransport: timeout is " + timeout + "; it must be positive");
        }
        Group g = new Group();
        for (int r = 0; r < worldSize; r++) {
            g.members.add(new InJvmTransport(g, r, worldSize, timeout));
        }
        return Collections.unmodifiableList(g.members);
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int worldSize() {
        return worldSize;
    }

    @Override
    public CompletableFuture<Void> send(int peer, int tag, INDArray array) {
        checkPeerAndTag("send", peer, tag);
        ArrayBytes.checkSendable("InJvmTransport.send", array, Integer.MAX_VALUE);
        if (closed.get()) {
            return CompletableFuture.failedFuture(new TransportClosedException("rank " + rank + ": send to rank "
                    + peer + " with tag " + tag + " after close"));
        }
        String failure = mailbox.peerFailure(peer);
        if (failure != null) {
            return CompletableFuture.failedFuture(new PeerFailedException(rank, peer, tag, failure));
        }
        if (peer != rank) {
            traffic.record(peer, tag, ArrayBytes.byteLength(array));
        }
        // A copy: the sender may overwrite its array at once, and the receiver owns what it gets.
        group.members.get(peer).mailbox.deliver(rank, tag, ArrayBytes.detachedCopy(array));
        return CompletableFuture.completedFuture(null);
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag, INDArray into) {
        checkPeerAndTag("receive", peer, tag);
        if (into == null) {
            throw new IllegalArgumentException("InJvmTransport.receive: the array to receive into is null");
        }
        return mailbox.receive(peer, tag, into, TransportThreads.completer());
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag) {
        checkPeerAndTag("receive", peer, tag);
        return mailbox.receive(peer, tag);
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag, INDArray into, Executor completion) {
        checkPeerAndTag("receive", peer, tag);
        return mailbox.receive(peer, tag, into, Objects.requireNonNull(completion, "completion"));
    }

    @Override
    public TrafficCounter traffic() {
        return traffic;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    /** Closes this rank; the other ranks' receives waiting on it fail with {@link PeerFailedException}. */
    @Override
    public void close() {
        leave("closed", PeerFailedException.closedReason(rank));
    }

    /**
     * Simulates a crash of this rank (for fault tests): its own calls fail with
     * {@link TransportClosedException}, and every other rank's calls on it fail with {@link PeerFailedException}.
     */
    public void kill() {
        leave("killed", "rank " + rank + " was killed");
    }

    private void leave(String ownReason, String peersReason) {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        mailbox.close(ownReason);
        for (InJvmTransport other : group.members) {
            if (other != this) {
                other.mailbox.failPeer(rank, peersReason);
            }
        }
    }

    private void checkPeerAndTag(String call, int peer, int tag) {
        if (peer < 0 || peer >= worldSize) {
            throw new IllegalArgumentException("InJvmTransport." + call + ": peer " + peer + " is outside [0, "
                    + worldSize + ")");
        }
        if (tag < 0) {
            throw new IllegalArgumentException("InJvmTransport." + call + ": tag " + tag + " is negative");
        }
    }
}
