package org.attn4j.samples.metrics;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;

/**
 * glibc's {@code malloc_trim(0)}, reached through JNA (which ND4J already brings, through oshi), so peak
 * memory readings start from a heap that holds no freed-but-resident memory. A no-op where there is no
 * glibc (macOS, musl) or no JNA.
 */
final class MallocTrim {

    private static final Function TRIM = find();

    private MallocTrim() {
    }

    /** Returns free heap memory to the system; true if glibc released any. */
    static boolean trim() {
        if (TRIM == null) {
            return false;
        }
        return TRIM.invokeInt(new Object[] {0}) == 1;
    }

    private static Function find() {
        try {
            return NativeLibrary.getInstance("c").getFunction("malloc_trim");
        } catch (UnsatisfiedLinkError | RuntimeException | NoClassDefFoundError e) {
            return null;
        }
    }
}
