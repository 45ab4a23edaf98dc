package org.attn4j.distributed.transport;

/** The transport was closed while a call was waiting, or a call came after close. */
public class TransportClosedException extends TransportException {

    /** With a message naming the rank and the call. */
    public TransportClosedException(String message) {
        super(message);
    }
}
