package org.attn4j.distributed.transport;

/** A transport call that failed; the message names this rank, the peer and the tag where they apply. */
public class TransportException extends RuntimeException {

    /** With a message that names rank, peer and tag. */
    public TransportException(String message) {
        super(message);
    }

    /** With a message and the cause. */
    public TransportException(String message, Throwable cause) {
        super(message, cause);
    }
}
