package org.attn4j.samples;

import java.util.ArrayList;
import java.util.List;

/**
 * Reading an {@link OutOfMemoryError} out of a failure. JavaCPP reports a tripped bound in two errors: the outer one
 * names the allocation ("Cannot allocate new LongPointer(3): totalBytes = 256, physicalBytes = 1207M"), its cause
 * the bound that tripped ("Physical memory usage is too high: physicalBytes (1207M) &gt; maxPhysicalBytes (1145M)"
 * or "... totalBytes (...) &gt; maxBytes (...)"); a message needs both to say which bound to raise.
 */
public final class OutOfMemory {

    private OutOfMemory() {
    }

    /**
     * The messages of every {@link OutOfMemoryError} in {@code failure}'s cause chain, outermost first, on one line
     * joined by "; ", or null if there is none.
     */
    public static String in(Throwable failure) {
        List<String> messages = new ArrayList<>();
        for (Throwable t = failure; t != null && messages.size() < 8; t = t.getCause()) {
            if (t instanceof OutOfMemoryError) {
                String m = oneLine(t.getMessage());
                if (!m.isEmpty() && !messages.contains(m)) {
                    messages.add(m);
                }
                if (m.isEmpty() && messages.isEmpty()) {
                    messages.add(t.getClass().getSimpleName());
                }
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return messages.isEmpty() ? null : String.join("; ", messages);
    }

    /**
     * {@code failure} in one line: "out of memory: ..." when an {@link OutOfMemoryError} is in its cause chain,
     * else its message (or its class name when it has none).
     */
    public static String describe(Throwable failure) {
        String oom = in(failure);
        if (oom != null) {
            return "out of memory: " + oom;
        }
        String m = oneLine(failure.getMessage());
        return m.isEmpty() ? failure.getClass().getName() : m;
    }

    /** {@code message} with its line breaks (and the blanks around them) replaced by "; ". */
    static String oneLine(String message) {
        return message == null ? "" : message.strip().replaceAll("\\s*\\R\\s*", "; ");
    }
}
