package org.attn4j.samples;

/**
 * The resident memory at which JavaCPP collects garbage before it lets ND4J allocate more (its
 * {@code maxPhysicalBytes}), read once when ND4J loads. ND4J's arrays live off-heap and are freed when their Java
 * objects are collected, so this bound, not the Java heap, is what keeps a run's memory in check. JavaCPP's own
 * default is four times the Java heap, which with the CLI's small heap would stop large jobs; the CLI lifts it
 * unless the user set one ({@code -Dorg.bytedeco.javacpp.maxphysicalbytes=SIZE}), and a command that knows its
 * job (train) sets its own.
 */
public final class MemoryLimit {

    /** JavaCPP's property. */
    public static final String PROPERTY = "org.bytedeco.javacpp.maxphysicalbytes";
    private static final String CAMEL = "org.bytedeco.javacpp.maxPhysicalBytes";
    private static boolean userSet;

    private MemoryLimit() {
    }

    /** In {@code main}, before ND4J loads: no bound unless the user set one. */
    static void liftDefault() {
        userSet = System.getProperty(PROPERTY) != null || System.getProperty(CAMEL) != null;
        if (!userSet) {
            System.setProperty(PROPERTY, "0");
        }
    }

    /**
     * A command's bound, before ND4J loads: applied when {@code explicit} (the command's own option) or when the
     * user set no property.
     */
    public static void set(long bytes, boolean explicit) {
        if (explicit || !userSet) {
            System.setProperty(PROPERTY, Long.toString(bytes));
        }
    }
}
