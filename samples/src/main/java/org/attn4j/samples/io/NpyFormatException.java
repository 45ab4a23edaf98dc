package org.attn4j.samples.io;

import java.io.IOException;

/** A {@code .npy} file that is not a well-formed float32/float64 array; the message names the file. */
public final class NpyFormatException extends IOException {

    private static final long serialVersionUID = 1L;

    /** @param message what was expected and what the file holds */
    public NpyFormatException(String message) {
        super(message);
    }
}
