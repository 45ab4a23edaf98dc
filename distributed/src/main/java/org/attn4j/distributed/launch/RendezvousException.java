package org.attn4j.distributed.launch;

/** The ranks of a job could not meet; the message is one line naming what is missing or wrong. */
public final class RendezvousException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    /** @param message one line: what went wrong, and which ranks or variables it concerns */
    public RendezvousException(String message) {
        super(message);
    }
}
