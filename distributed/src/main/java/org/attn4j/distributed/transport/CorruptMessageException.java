package org.attn4j.distributed.transport;

/**
 * A message arrived damaged (its checksum did not match, or its chunks did not add up) and was not delivered.
 * The receive that would have returned it fails with this exception instead, so the messages after it on the
 * same (peer, tag) still arrive in order.
 */
public class CorruptMessageException extends TransportException {

    /**
     * @param rank   this rank
     * @param peer   the sending rank
     * @param tag    the message's tag
     * @param detail what was wrong, e.g. "checksum mismatch in chunk 3 of 40 of message 17"
     */
    public CorruptMessageException(int rank, int peer, int tag, String detail) {
        super("rank " + rank + ": message from rank " + peer + " with tag " + tag + " dropped: " + detail);
    }
}
