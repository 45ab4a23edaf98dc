package org.attn4j.distributed.transport;

/** A peer died or disconnected while a call depended on it. */
public class PeerFailedException extends TransportException {

    private static final String CLOSED = " closed its transport";

    private final int rank;
    private final int peer;
    private final int tag;
    private final String reason;

    /**
     * @param rank   this rank
     * @param peer   the failed peer
     * @param tag    the tag of the call that noticed, or -1
     * @param reason how the failure was noticed
     */
    public PeerFailedException(int rank, int peer, int tag, String reason) {
        super("rank " + rank + ": peer rank " + peer + (unreachable(rank, peer, reason) ? " unreachable" : " failed")
                + (tag >= 0 ? " (tag " + tag + ")" : "") + ": " + reason);
        this.rank = rank;
        this.peer = peer;
        this.tag = tag;
        this.reason = reason;
    }

    /** The reason a transport records when {@code peer} closed its transport on purpose (said goodbye). */
    public static String closedReason(int peer) {
        return "rank " + peer + CLOSED;
    }

    /**
     * The reason a transport records for every peer when it lost its media driver (the host's shared driver ran
     * in another rank's process, which ended): the peers may be alive, but no message reaches them.
     */
    public static String driverLostReason(int rank) {
        return "rank " + rank + " lost its media driver";
    }

    /** Whether this rank, not the peer, failed: it lost its media driver ({@link #driverLostReason}). */
    public boolean driverLost() {
        return driverLost(rank, reason);
    }

    private static boolean driverLost(int rank, String reason) {
        return driverLostReason(rank).equals(reason);
    }

    /** Alive but cut off: this rank or the peer lost its media driver (the peer's loss as another rank reports it). */
    private static boolean unreachable(int rank, int peer, String reason) {
        return driverLost(rank, reason) || reason != null && reason.endsWith(driverLostReason(peer));
    }

    /**
     * Whether the peer closed its transport on purpose rather than dying or falling silent. Mid-collective that
     * is still a failure for this rank, but usually a consequence of another rank's: see the collectives.
     */
    public boolean peerClosed() {
        return reason != null && reason.equals(closedReason(peer));
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
