package org.attn4j.distributed.transport;

/**
 * An Aeron publication reached its maximum position (term length times 2^31 bytes) and cannot carry more data;
 * the link to that peer is finished. With the default 16 MiB terms this takes 32 PiB of traffic.
 */
public class MaxPositionExceededException extends TransportException {

    /** With a message naming this rank, the peer and the tag. */
    public MaxPositionExceededException(String message) {
        super(message);
    }
}
