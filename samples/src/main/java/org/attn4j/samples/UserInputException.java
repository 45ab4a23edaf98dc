package org.attn4j.samples;

/**
 * A mistake in what the user gave a command (a missing file, a wrong shape, a bad option value).
 *
 * <p>{@link Attn4jCli} prints its message as one line on stderr, prefixed with the command name, with no
 * stack trace, and exits with {@link Attn4jCli#EXIT_BAD_INPUT}. Anything else thrown is a bug and keeps
 * its stack trace.
 */
public class UserInputException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** @param message one line naming what was expected and what came */
    public UserInputException(String message) {
        super(message);
    }

    /**
     * @param message one line naming what was expected and what came
     * @param cause   the underlying error, kept for debugging
     */
    public UserInputException(String message, Throwable cause) {
        super(message, cause);
    }
}
