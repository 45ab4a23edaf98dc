package org.attn4j.distributed.transport;

/** A peer died or disconnected while a call depended on it. */
public class PeerFailedException extends TransportException {

    /**
     * @param rank   this rank
     * @param peer   the failed peer
     * @param tag    the tag of the call that noticed, or -1
     * @param reason how the failure was noticed
     */
    public PeerFailedException(int rank, int peer, int tag, String reason) {
        super("rank " + rank + ": peer rank " + peer + " failed" + (tag >= 0 ? " (tag " + tag + ")" : "") + ": "
                + reason);
    }
}
