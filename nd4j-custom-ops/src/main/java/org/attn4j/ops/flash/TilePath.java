package org.attn4j.ops.flash;

import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.attn4j.ops.Kernel;
import org.nd4j.linalg.factory.Nd4j;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which code runs flash attention's tiles, and why: the one place that decides it. {@link TileMath#forType} builds
 * what {@link #cpuKernel()} names, {@link FlashAttention#tileCode()} reports {@link #current()}, and every flash call
 * passes through {@link #logOnce()}.
 *
 * <p>The CPU kernel's tile code, fastest first: attn4j's native AVX-512 code (float32, {@link NativeTileMath}), the
 * JDK Vector API passes ({@link VectorTileMath}), ND4J element-wise ops ({@link Nd4jTileMath}). The portable kernel
 * ({@link Kernel#PORTABLE}) runs ND4J operations only and no tile code.
 *
 * @param kernel    the kernel a call runs now
 * @param portable  why the portable kernel runs, or null for the CPU kernel
 * @param nativeOff why the CPU kernel does not run the native tile code, or null when it does
 * @param vectorOff why the CPU kernel does not run the Vector API passes (masks, float64 tiles, float32 tiles without
 *                  the native code), or null when it does
 */
record TilePath(Kernel kernel, Reason portable, Reason nativeOff, Reason vectorOff) {

    /** {@code -Dattn4j.noVector=true}: ND4J element-wise ops instead of any faster tile code. */
    static final String NO_VECTOR = "attn4j.noVector";
    /** {@code -Dattn4j.nativeTiles=false}: the Java tile code instead of the native one. */
    static final String NATIVE_TILES = "attn4j.nativeTiles";

    private static final Logger LOG = LoggerFactory.getLogger(FlashAttention.class);
    /** The lines logged so far: one per path a call took, so once per process unless a property switches paths. */
    private static final Set<String> LOGGED = ConcurrentHashMap.newKeySet();

    /** Why a faster path is not taken. */
    enum Cause {
        NO_VECTOR_PROPERTY(true),
        NATIVE_TILES_PROPERTY(true),
        KERNEL_PROPERTY(true),
        NOT_CPU_BACKEND(true),
        NOT_LINUX_X86_64(false),
        NOT_BUILT(false),
        LOAD_FAILED(false),
        NO_AVX512F(false),
        NO_VECTOR_MODULE(false);

        /** True when a setting or the backend chose the path; false when the build or the host forced it. */
        final boolean chosen;

        Cause(boolean chosen) {
            this.chosen = chosen;
        }
    }

    /**
     * A cause and its explanation in words, for logs and messages.
     *
     * @param cause what kind of reason
     * @param text  the reason as a reader should see it, with what to do where there is something to do
     */
    record Reason(Cause cause, String text) {
        @Override
        public String toString() {
            return text;
        }
    }

    private static final Reason NO_VECTOR_SET = new Reason(Cause.NO_VECTOR_PROPERTY,
            "turned off by -D" + NO_VECTOR + "=true");
    private static final Reason NATIVE_TILES_SET = new Reason(Cause.NATIVE_TILES_PROPERTY,
            "turned off by -D" + NATIVE_TILES + "=false");
    private static final Reason KERNEL_SET = new Reason(Cause.KERNEL_PROPERTY,
            "chosen by -D" + Kernel.PROPERTY + "=portable");
    private static final Reason NO_VECTOR_MODULE = new Reason(Cause.NO_VECTOR_MODULE,
            "the module jdk.incubator.vector is not present: run Java with --add-modules jdk.incubator.vector");

    /** The path the next flash call takes, with the system properties as they are now. */
    static TilePath current() {
        Kernel kernel = Kernel.current();
        return of(kernel, kernel == Kernel.PORTABLE ? whyPortable() : null);
    }

    /** The tile code the CPU kernel runs, with the system properties as they are now. */
    static TilePath cpuKernel() {
        return of(Kernel.CPU, null);
    }

    private static TilePath of(Kernel kernel, Reason portable) {
        // The properties come first: they decided this run even where the host could not have run faster.
        boolean noVector = Boolean.getBoolean(NO_VECTOR);
        Reason vectorOff = noVector ? NO_VECTOR_SET : VectorTileMath.AVAILABLE ? null : NO_VECTOR_MODULE;
        Reason nativeOff = noVector ? NO_VECTOR_SET
                : "false".equals(System.getProperty(NATIVE_TILES)) ? NATIVE_TILES_SET
                : NativeTileMath.UNAVAILABLE;
        return new TilePath(kernel, portable, nativeOff, vectorOff);
    }

    private static Reason whyPortable() {
        String value = System.getProperty(Kernel.PROPERTY, "auto").strip().toLowerCase(Locale.ROOT);
        return value.equals("portable") ? KERNEL_SET : new Reason(Cause.NOT_CPU_BACKEND, "the ND4J backend is "
                + Nd4j.getBackend().getClass().getSimpleName() + ", not the CPU one");
    }

    /** Whether the CPU kernel runs the native tile code for float32 tiles. */
    boolean nativeInUse() {
        return nativeOff == null;
    }

    /** Whether the CPU kernel runs the Vector API passes where the native code does not run. */
    boolean vectorInUse() {
        return vectorOff == null;
    }

    /**
     * Whether the build or the host forced a slower path than this machine could run (a warning), rather than a
     * property or the backend choosing it (or the fastest path running).
     */
    boolean fallback() {
        if (kernel == Kernel.PORTABLE) {
            return !portable.cause().chosen;
        }
        return nativeOff != null && !nativeOff.cause().chosen || vectorOff != null && !vectorOff.cause().chosen;
    }

    /** What runs, and why where it is not the fastest code: {@link FlashAttention#tileCode()}. */
    String describe() {
        if (kernel == Kernel.PORTABLE) {
            return "portable kernel, ND4J operations only (" + portable + ")";
        }
        if (nativeInUse()) {
            return vectorInUse() ? "native AVX-512 tile code"
                    : "native AVX-512 tile code, masks and float64 tiles by ND4J element-wise ops (Vector API not in "
                    + "use: " + vectorOff + ")";
        }
        String java = vectorInUse() ? "Java Vector API tile pass" : "ND4J element-wise ops";
        String vectorToo = vectorInUse() || vectorOff.equals(nativeOff) ? "" : "; Vector API not in use: " + vectorOff;
        return java + " and OpenBLAS products (native tile code not in use: " + nativeOff + vectorToo + ")";
    }

    /** The log line: the path and why it runs. */
    String line() {
        String why = kernel == Kernel.CPU && nativeInUse() && vectorInUse()
                ? " (libattn4jtiles.so loaded, the CPU has AVX-512F)" : "";
        return "FlashAttention runs: " + describe() + why;
    }

    /**
     * Logs {@link #line()} the first time a flash call takes this path: warn for a {@link #fallback()}, else info
     * (the fastest path, or one a setting chose, needs no action). One line per process unless a property switches
     * paths between calls.
     */
    void logOnce() {
        String line = line();
        if (LOGGED.add(line)) {
            if (fallback()) {
                LOG.warn(line);
            } else {
                LOG.info(line);
            }
        }
    }
}
