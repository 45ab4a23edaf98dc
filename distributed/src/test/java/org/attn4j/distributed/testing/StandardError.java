package org.attn4j.distributed.testing;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * What a piece of code prints on {@code System.err}, where the tests' slf4j binding (slf4j-simple) writes its log
 * lines: it looks up {@code System.err} at every line, so a stream swapped in for the duration catches them.
 */
public final class StandardError {

    private StandardError() {
    }

    /** A body that may throw. */
    @FunctionalInterface
    public interface Body {
        /** Runs the body. */
        void run() throws Exception;
    }

    /** The lines {@code body} printed on standard error (which is restored afterwards, also if it throws). */
    public static List<String> linesOf(Body body) throws Exception {
        PrintStream err = System.err;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            body.run();
        } finally {
            System.setErr(err);
        }
        return captured.toString(StandardCharsets.UTF_8).lines().toList();
    }
}
