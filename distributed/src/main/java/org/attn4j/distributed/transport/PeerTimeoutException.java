package org.attn4j.distributed.transport;

import java.time.Duration;

/** A call waited longer than the transport's timeout for a peer. */
public class PeerTimeoutException extends TransportException {

    /**
     * @param rank   this rank
     * @param peer   the peer it waited for
     * @param tag    the tag of the call
     * @param waited how long it waited
     * @param what   what it waited for, e.g. "receive" or "send (back pressure)"
     */
    public PeerTimeoutException(int rank, int peer, int tag, Duration waited, String what) {
        super("rank " + rank + ": " + what + " from/to rank " + peer + " with tag " + tag + " timed out after "
                + waited.toMillis() + " ms");
    }
}
