package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.Callable;

import org.junit.jupiter.api.Test;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * A command that runs out of memory (JavaCPP's bound on resident memory, as ND4J reports it from inside a DL4J
 * forward pass) ends in one line naming the allocation, the bound that tripped and how to raise it, not an internal
 * error.
 */
class OutOfMemoryMessageTest {

    @Command(name = "fill")
    static final class Fill implements Callable<Integer> {
        @Override
        public Integer call() {
            // As JavaCPP 1.5.7 throws it: the allocation that failed, caused by the bound that tripped.
            OutOfMemoryError allocation = new OutOfMemoryError("Cannot allocate new LongPointer(3): totalBytes = "
                    + "256, physicalBytes = 1052M");
            allocation.initCause(new OutOfMemoryError("Physical memory usage is too high: physicalBytes (1052M) > "
                    + "maxPhysicalBytes (1036M)"));
            throw new RuntimeException("Error during neural network forward pass", new RuntimeException(allocation));
        }
    }

    /** As DL4J's {@code fit} lets it out: the error itself, not wrapped in an exception. */
    @Command(name = "fit")
    static final class Fit implements Callable<Integer> {
        @Override
        public Integer call() {
            OutOfMemoryError allocation = new OutOfMemoryError("Cannot allocate new LongPointer(2): totalBytes = "
                    + "256, physicalBytes = 985M");
            allocation.initCause(new OutOfMemoryError("Physical memory usage is too high: physicalBytes (985M) > "
                    + "maxPhysicalBytes (984M)"));
            throw allocation;
        }
    }

    @Test
    void isOneLineWhenTheErrorComesUnwrapped() {
        StringWriter err = new StringWriter();
        CommandLine cl = Attn4jCli.commandLine();
        cl.addSubcommand("fit", new Fit());
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute("fit");
        String text = err.toString().strip();
        assertEquals(Attn4jCli.EXIT_JOB_FAILED, code, text);
        assertEquals(1, text.split("\\R").length, text);
        assertTrue(text.startsWith("fit: out of memory: Cannot allocate new LongPointer(2): totalBytes = 256, "
                + "physicalBytes = 985M; Physical memory usage is too high: physicalBytes (985M) > "
                + "maxPhysicalBytes (984M) (raise the bound"), text);
    }

    @Test
    void isOneLineWithTheFiguresAndTheWayOut() {
        StringWriter err = new StringWriter();
        CommandLine cl = Attn4jCli.commandLine();
        cl.addSubcommand("fill", new Fill());
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute("fill");
        String text = err.toString().strip();
        assertEquals(Attn4jCli.EXIT_JOB_FAILED, code, text);
        assertEquals(1, text.split("\\R").length, text);
        assertTrue(text.startsWith("fill: out of memory: Cannot allocate new LongPointer(3): totalBytes = 256, "
                + "physicalBytes = 1052M; Physical memory usage is too high: physicalBytes (1052M) > "
                + "maxPhysicalBytes (1036M)"), "which bound tripped, not only the allocation: " + text);
        assertTrue(text.contains("--memory-limit") && text.contains(MemoryLimit.PROPERTY), text);
        assertFalse(text.contains("internal error") || text.contains("\tat "), text);
    }
}
