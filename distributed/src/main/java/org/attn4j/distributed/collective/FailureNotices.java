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
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.transport.AeronTransport;
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
 * <p>The rank that noticed hears no notice (it sends none to itself), so once its notices are handed to the
 * transport it fails its own other communicators' calls the same way. Without that, a rank with several
 * communicators (the row, column and world of ATTENTION2D) that noticed on one while blocked on another would
 * wait there for a live member that has already given up on hearing its notice, and fail only at its own
 * transport timeout, naming that member instead of {@code X}.
 *
 * <pre>
 *   notice: LONG [2] = {failed rank, 0 = failed | 1 = timed out | 2 = lost its media driver},
 *           tag {@link CollectiveTags#NOTICE_TAG}
 * </pre>
 *
 * A notice receive that times out is posted again; one that fails because the peer left is dropped (a rank that
 * closes its transport after its last call is no failure). A notice naming this very rank as timed out comes from
 * a rank that waited on this one while this one waited on a third: this rank gives its own transport a quarter of
 * the timeout to fail that third rank, so that its failure names the rank that stopped the job.
 */
final class FailureNotices {

    private static final long FAILED = 0;
    private static final long TIMED_OUT = 1;
    /** The rank named lost its media driver: alive, but cut off from its host's ranks. */
    private static final long DRIVER_LOST = 2;
    /** A notice that this rank timed out waits the timeout divided by this for this rank's own finding. */
    private static final long SELF_NOTICE_DELAY_DIVISOR = 4;
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
                PeerFailedException failure = new PeerFailedException(transport.rank(), (int) v[0], -1,
                        v[1] == DRIVER_LOST && sharesDriver((int) v[0])
                        // The driver it lost is this rank's too: this rank is cut off as well, whichever hears first.
                        ? PeerFailedException.driverLostReason(transport.rank())
                        : "rank " + peer + " reported that rank " + v[0] + (v[1] == TIMED_OUT ? " timed out"
                        : v[1] == DRIVER_LOST ? " lost its media driver" : " failed"));
                if (v[0] == transport.rank() && v[1] == TIMED_OUT) {
                    // This rank is alive: it stopped answering because it waits on another. Its own transport fails
                    // a silent peer within a heartbeat of the timeout, so the notice waits a quarter of the timeout
                    // for that finding, which names the rank that stopped the job instead of this one.
                    CompletableFuture.delayedExecutor(transport.timeout().toMillis() / SELF_NOTICE_DELAY_DIVISOR,
                            TimeUnit.MILLISECONDS).execute(() -> failAll(failure, null));
                } else {
                    failAll(failure, null);
                }
            } else if (unwrap(e) instanceof PeerTimeoutException) {
                listen(peer);
            } else if (unwrap(e) instanceof TransportClosedException) {
                synchronized (BY_TRANSPORT) {
                    BY_TRANSPORT.remove(transport);
                }
            }
        });
    }

    /** Whether {@code rank} reaches this rank over IPC, through the media driver of this rank's host. */
    private boolean sharesDriver(int rank) {
        return transport instanceof AeronTransport a && a.context().ipcPeer(rank);
    }

    /**
     * If {@code failure} is a transport failure naming a peer, tells every other rank, once per failed peer (the
     * failed one too: a rank that only timed out is alive, and should stop waiting as well); then fails the calls
     * of this rank's communicators as a notice would, so that none of them waits on a member that gave up on
     * hearing this rank's notice. {@code origin}'s other calls in flight fail too, but {@code origin} keeps its
     * own failure (it refuses later calls as after any failed call).
     *
     * @param failure what failed the call
     * @param origin  the communicator of the call that failed
     * @param call    that call, e.g. {@code "allGather call 3 (channel 1) on group [0, 2] (rank 0 at index 0)"}
     * @return completes when the notices are handed to the transport (or could not be) and this rank's other
     *         calls have been failed
     */
    CompletableFuture<Void> tell(Throwable failure, Communicator origin, String call) {
        Throwable cause = unwrap(failure);
        int failed;
        long kind;
        if (cause instanceof PeerFailedException f && f.driverLost()) {
            // This rank, not the peer it waited on, is cut off: that is what the others hear.
            failed = transport.rank();
            kind = DRIVER_LOST;
        } else if (cause instanceof PeerFailedException f) {
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
        // After the sends, as for the failing call itself: a worker that exits on the exception has spread the news.
        PeerFailedException here = new PeerFailedException(transport.rank(), failed, -1, "this rank's " + call
                + (kind == TIMED_OUT ? " timed out waiting for rank " + failed : kind == DRIVER_LOST
                ? " failed: this rank lost its media driver" : " saw the failure of rank " + failed));
        return CompletableFuture.allOf(sent.toArray(new CompletableFuture<?>[0]))
                .thenRun(() -> failAll(here, origin));
    }

    /**
     * Fails every call of this rank's communicators with {@code failure} (a notice, or this rank's own finding),
     * remembering the first for communicators created later; {@code origin} (null for a notice) only has its
     * calls in flight failed.
     */
    private void failAll(PeerFailedException failure, Communicator origin) {
        if (heard == null) {
            heard = failure;                           // before the snapshot: see register
        }
        List<Communicator> all;
        synchronized (listeners) {
            all = new ArrayList<>(listeners);
        }
        for (Communicator c : all) {
            if (c == origin) {
                c.failCalls(failure);
            } else {
                c.failedElsewhere(failure);
            }
        }
    }

    private static Throwable unwrap(Throwable e) {
        while ((e instanceof CompletionException || e instanceof CollectiveException) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }
}
