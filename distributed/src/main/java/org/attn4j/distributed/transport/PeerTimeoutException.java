package org.attn4j.distributed.transport;

import java.time.Duration;

/** A call waited longer than the transport's timeout for a peer. */
public class PeerTimeoutException extends TransportException {

    private final int rank;
    private final int peer;
    private final int tag;
    private final Duration waited;

    /**
     * @param rank   this rank
     * @param peer   the peer it waited for
     * @param tag    the tag of the call
     * @param waited how long it waited
     * @param what   what it waited for, e.g. "receive" or "send (back pressure)"
     */
    public PeerTimeoutException(int rank, int peer, int tag, Duration waited, String what) {
        super("rank " + rank + ": " + what + " with peer rank " + peer + ", tag " + tag + ", timed out after "
                + waited.toMillis() + " ms");
        this.rank = rank;
        this.peer = peer;
        this.tag = tag;
        this.waited = waited;
    }

    /** The rank that waited. */
    public int rank() {
        return rank;
    }

    /** The peer it waited for. */
    public int peer() {
        return peer;
    }

    /** The tag of the call. */
    public int tag() {
        return tag;
    }

    /** How long the call waited. */
    public Duration waited() {
        return waited;
    }
}
