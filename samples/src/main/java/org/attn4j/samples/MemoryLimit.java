package org.attn4j.samples;

import java.util.List;

/**
 * The resident memory at which JavaCPP collects garbage before it lets ND4J allocate more (its
 * {@code maxPhysicalBytes}), read once when ND4J loads. ND4J's arrays live off-heap and are freed when their Java
 * objects are collected, so this bound, not the Java heap, is what keeps a run's memory in check. JavaCPP's own
 * default is four times the Java heap, which with the CLI's small heap would stop large jobs; the CLI lifts it
 * unless the user set one ({@code -Dorg.bytedeco.javacpp.maxphysicalbytes=SIZE}), and a command that knows its
 * job (train) sets its own.
 *
 * <p>JavaCPP's other bound, {@code maxBytes} (default: the Java heap's maximum), counts only the memory JavaCPP
 * allocates itself; ND4J 1.0.0-M2.1 allocates its arrays past it (it read 256 bytes while the resident memory was
 * 1.2 GB). The CLI sets it with the resident bound (no bound, or the same one), so there is one bound to reason
 * about, unless the user set it ({@code -Dorg.bytedeco.javacpp.maxbytes=SIZE}).
 */
public final class MemoryLimit {

    /** JavaCPP's property. */
    public static final String PROPERTY = "org.bytedeco.javacpp.maxphysicalbytes";
    private static final String CAMEL = "org.bytedeco.javacpp.maxPhysicalBytes";
    private static final String BYTES = "org.bytedeco.javacpp.maxbytes";
    private static final String BYTES_CAMEL = "org.bytedeco.javacpp.maxBytes";
    private static boolean userSet;
    private static boolean userSetBytes;

    private MemoryLimit() {
    }

    /** In {@code main}, before ND4J loads: no bound unless the user set one. */
    static void liftDefault() {
        userSet = System.getProperty(PROPERTY) != null || System.getProperty(CAMEL) != null;
        userSetBytes = System.getProperty(BYTES) != null || System.getProperty(BYTES_CAMEL) != null;
        if (!userSet) {
            System.setProperty(PROPERTY, "0");
        }
        if (!userSetBytes) {
            System.setProperty(BYTES, "0");
        }
    }

    /** The JVM flags that start a process of its own with neither bound (as {@link #liftDefault} leaves the CLI). */
    public static List<String> unboundedFlags() {
        return List.of("-D" + PROPERTY + "=0", "-D" + BYTES + "=0");
    }

    /**
     * A command's bound, before ND4J loads: applied when {@code explicit} (the command's own option) or when the
     * user set no property.
     */
    public static void set(long bytes, boolean explicit) {
        if (explicit || !userSet) {
            // JavaCPP reads the camel-case name over the other: a user's -D of it must not win over --memory-limit.
            System.setProperty(PROPERTY, Long.toString(bytes));
            System.setProperty(CAMEL, Long.toString(bytes));
            if (!userSetBytes) {
                System.setProperty(BYTES, Long.toString(bytes));
            }
        }
    }
}
