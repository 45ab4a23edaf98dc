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
 * forward pass) ends in one line naming the figures and how to raise the bound, not an internal error.
 */
class OutOfMemoryMessageTest {

    @Command(name = "fill")
    static final class Fill implements Callable<Integer> {
        @Override
        public Integer call() {
            throw new RuntimeException("Error during neural network forward pass", new RuntimeException(
                    new OutOfMemoryError("Physical memory usage is too high: physicalBytes (1052M) > "
                            + "maxPhysicalBytes (1036M)")));
        }
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
        assertTrue(text.startsWith("fill: out of memory: Physical memory usage is too high: physicalBytes (1052M) > "
                + "maxPhysicalBytes (1036M)"), text);
        assertTrue(text.contains("--memory-limit") && text.contains(MemoryLimit.PROPERTY), text);
        assertFalse(text.contains("internal error") || text.contains("\tat "), text);
    }
}
