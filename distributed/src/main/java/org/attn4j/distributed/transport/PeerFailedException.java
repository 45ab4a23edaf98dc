package org.attn4j.distributed.transport;

/** A peer died or disconnected while a call depended on it. */
public class PeerFailedException extends TransportException {

    private final int rank;
    private final int peer;
    private final int tag;

    /**
     * @param rank   this rank
     * @param peer   the failed peer
     * @param tag    the tag of the call that noticed, or -1
     * @param reason how the failure was noticed
     */
    public PeerFailedException(int rank, int peer, int tag, String reason) {
        super("rank " + rank + ": peer rank " + peer + " failed" + (tag >= 0 ? " (tag " + tag + ")" : "") + ": "
                + reason);
        this.rank = rank;
        this.peer = peer;
        this.tag = tag;
    }

    /** The rank that noticed the failure. */
    public int rank() {
        return rank;
    }

    /** The failed peer. */
    public int peer() {
        return peer;
    }

    /** The tag of the call that noticed, or -1. */
    public int tag() {
        return tag;
    }
}
