package org.attn4j.distributed.collective;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

import org.attn4j.distributed.transport.PeerFailedException;
import org.attn4j.distributed.transport.PeerTimeoutException;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.distributed.transport.TransportClosedException;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Spreads a failure across the job, one instance per transport. The transport fails only the calls that wait on
 * a dead or silent peer; in a ring the others wait on a live neighbour that has stopped forwarding and would
 * learn of the failure one hop at a time, each naming its neighbour, each after its own wait. So a rank whose
 * collective fails because rank {@code X} died or timed out tells every other rank, and every rank keeps one
 * receive posted per peer for such notices: on hearing one, all its communicators fail their calls at once,
 * naming {@code X}. The job cannot go on without {@code X} anyway.
 *
 * <pre>
 *   notice: LONG [2] = {failed rank, 0 = failed | 1 = timed out}, tag {@link CollectiveTags#NOTICE_TAG}
 * </pre>
 *
 * A notice receive that times out is posted again; one that fails because the peer left is dropped (a rank that
 * closes its transport after its last call is no failure).
 */
final class FailureNotices {

    private static final long FAILED = 0;
    private static final long TIMED_OUT = 1;
    /** By transport identity; an entry goes when its transport closes. */
    private static final Map<Transport, FailureNotices> BY_TRANSPORT = new IdentityHashMap<>();

    private final Transport transport;
    private final Set<Communicator> listeners = Collections.synchronizedSet(
            Collections.newSetFromMap(new WeakHashMap<>()));
    private final Set<Integer> told = Collections.synchronizedSet(new java.util.HashSet<>());
    /** The first notice heard, so that a communicator created after it still fails (set before notifying). */
    private volatile PeerFailedException heard;

    private FailureNotices(Transport transport) {
        this.transport = transport;
    }

    /** The transport's instance, listening from its first use. */
    static FailureNotices of(Transport transport) {
        FailureNotices n;
        synchronized (BY_TRANSPORT) {
            n = BY_TRANSPORT.get(transport);
            if (n != null) {
                return n;
            }
            n = new FailureNotices(transport);
            BY_TRANSPORT.put(transport, n);
        }
        for (int peer = 0; peer < transport.worldSize(); peer++) {
            if (peer != transport.rank()) {
                n.listen(peer);
            }
        }
        return n;
    }

    /**
     * Fails {@code c}'s calls when a notice arrives (held weakly), or at once if one has arrived already: a notice
     * can come in while a worker is still creating its communicators, and those created after it must not wait
     * for a peer that is gone.
     */
    void register(Communicator c) {
        listeners.add(c);
        PeerFailedException known = heard;
        if (known != null) {
            c.failedElsewhere(known);
        }
    }

    private void listen(int peer) {
        transport.receive(peer, CollectiveTags.NOTICE_TAG).whenComplete((notice, e) -> {
            if (e == null) {
                long[] v = notice.toLongVector();
                PeerFailedException failure = new PeerFailedException(transport.rank(), (int) v[0], -1, "rank " + peer
                        + " reported that rank " + v[0] + (v[1] == TIMED_OUT ? " timed out" : " failed"));
                if (heard == null) {
                    heard = failure;                   // before the snapshot: see register
                }
                List<Communicator> all;
                synchronized (listeners) {
                    all = new ArrayList<>(listeners);
                }
                all.forEach(c -> c.failedElsewhere(failure));
            } else if (unwrap(e) instanceof PeerTimeoutException) {
                listen(peer);
            } else if (unwrap(e) instanceof TransportClosedException) {
                synchronized (BY_TRANSPORT) {
                    BY_TRANSPORT.remove(transport);
                }
            }
        });
    }

    /**
     * If {@code failure} is a transport failure naming a peer, tells every other rank, once per failed peer (the
     * failed one too: a rank that only timed out is alive, and should stop waiting as well).
     *
     * @return completes when the notices are handed to the transport (or could not be)
     */
    CompletableFuture<Void> tell(Throwable failure) {
        Throwable cause = unwrap(failure);
        int failed;
        long kind;
        if (cause instanceof PeerFailedException f) {
            failed = f.peer();
            kind = FAILED;
        } else if (cause instanceof PeerTimeoutException t) {
            failed = t.peer();
            kind = TIMED_OUT;
        } else {
            return CompletableFuture.completedFuture(null);
        }
        if (!told.add(failed)) {
            return CompletableFuture.completedFuture(null);
        }
        INDArray notice = Nd4j.createFromArray(failed, kind);
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int peer = 0; peer < transport.worldSize(); peer++) {
            if (peer != transport.rank()) {
                sent.add(transport.send(peer, CollectiveTags.NOTICE_TAG, notice).exceptionally(e -> null));
            }
        }
        return CompletableFuture.allOf(sent.toArray(new CompletableFuture<?>[0]));
    }

    private static Throwable unwrap(Throwable e) {
        while ((e instanceof CompletionException || e instanceof CollectiveException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }
}
