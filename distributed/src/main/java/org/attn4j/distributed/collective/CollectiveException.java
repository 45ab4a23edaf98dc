package org.attn4j.distributed.collective;

import org.attn4j.distributed.transport.TransportException;

/**
 * A collective that failed: the message names the collective, the call, the group and this rank, followed by
 * the transport's message (which names the peer, the tag and the wait); the cause is the transport's exception
 * ({@link org.attn4j.distributed.transport.PeerFailedException},
 * {@link org.attn4j.distributed.transport.PeerTimeoutException}, ...) or the reduction's.
 */
public class CollectiveException extends TransportException {

    /** With a message that names the collective and the group, and the cause. */
    public CollectiveException(String message, Throwable cause) {
        super(message, cause);
    }
}
