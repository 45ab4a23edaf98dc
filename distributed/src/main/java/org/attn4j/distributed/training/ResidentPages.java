package org.attn4j.distributed.training;

import java.util.Optional;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Hands the memory pages of part of an ND4J array back to the operating system ({@code madvise(MADV_DONTNEED)}),
 * without freeing the array: DL4J's layers keep their views into one flat parameter vector and one flat gradient
 * vector, so ZeRO stages 2 and 3 cannot shrink those buffers, but they can drop the resident pages of the slices
 * this worker does not own. A released page reads as zeros until it is written again (the next all-gather of the
 * parameters, or the next backward pass for the gradients), when the kernel gives it a fresh page.
 *
 * <p>Only pages lying wholly inside the range are released, so the rest of the array and the allocator's own
 * bookkeeping around it are never touched. Linux (glibc) and ND4J's CPU backend only: elsewhere an array's host
 * buffer is a copy of device memory, and releasing it would zero that copy. {@link #unavailable()} says why pages
 * cannot be released in this process, if they cannot.
 */
final class ResidentPages {

    private static final int MADV_DONTNEED = 4;
    private static final Function MADVISE = find("madvise");
    private static final long PAGE = pageSize();

    private ResidentPages() {
    }

    /** The operating system's page size in bytes, or -1 where it is unknown. */
    static long pageBytes() {
        return PAGE;
    }

    /** Why pages cannot be released in this process, or empty when they can. */
    static Optional<String> unavailable() {
        boolean cpu = Nd4j.getEnvironment().isCPU();
        return unavailable(System.getProperty("os.name", ""), MADVISE != null && PAGE > 0, cpu,
                cpu ? "" : Nd4j.getBackend().getClass().getName());
    }

    /**
     * Why pages cannot be released on {@code os} with ND4J's {@code backend} (the class name; {@code cpuBackend}
     * whether it is the CPU backend), {@code madvise} found or not: what {@link #unavailable()} decides, apart
     * from where it looks.
     */
    static Optional<String> unavailable(String os, boolean madvise, boolean cpuBackend, String backend) {
        if (!os.toLowerCase(java.util.Locale.ROOT).contains("linux") || !madvise) {
            return Optional.of("needs madvise(2) of Linux with glibc, not available on " + os);
        }
        if (!cpuBackend) {
            return Optional.of("needs ND4J's CPU backend (nd4j-native), found " + backend
                    + ", where the host pages are a copy of device memory and releasing them would zero it");
        }
        return Optional.empty();
    }

    /**
     * Passes when {@code unavailable} (what {@link #unavailable()} says) is empty.
     *
     * @throws IllegalStateException naming why pages cannot be released here
     */
    static void requireReleasable(Optional<String> unavailable) {
        if (unavailable.isPresent()) {
            throw new IllegalStateException("ResidentPages: releasing pages " + unavailable.get());
        }
    }

    /**
     * Releases the pages holding elements {@code [from, to)} of {@code flat}, a contiguous vector.
     *
     * @return the bytes released (whole pages inside the range)
     * @throws IllegalStateException if pages cannot be released here ({@link #unavailable()}) or the call fails
     */
    static long release(INDArray flat, long from, long to) {
        if (to <= from) {
            return 0;
        }
        requireReleasable(unavailable());
        if (flat.elementWiseStride() != 1 || flat.length() < to) {
            throw new IllegalArgumentException("ResidentPages: expected a contiguous vector of at least " + to
                    + " elements, got shape " + java.util.Arrays.toString(flat.shape()) + " with element stride "
                    + flat.elementWiseStride());
        }
        long width = flat.dataType().width();
        long base = flat.data().addressPointer().address();    // a view's pointer already starts at its offset
        long start = Math.floorDiv(base + from * width + PAGE - 1, PAGE) * PAGE;
        long end = Math.floorDiv(base + to * width, PAGE) * PAGE;
        if (end <= start) {
            return 0;
        }
        int rc = MADVISE.invokeInt(new Object[] {new Pointer(start), end - start, MADV_DONTNEED});
        if (rc != 0) {
            throw new IllegalStateException("ResidentPages: madvise(" + Long.toHexString(start) + ", " + (end - start)
                    + ", MADV_DONTNEED) failed with " + rc);
        }
        return end - start;
    }

    private static Function find(String name) {
        try {
            return NativeLibrary.getInstance("c").getFunction(name);
        } catch (UnsatisfiedLinkError | RuntimeException | NoClassDefFoundError e) {
            return null;
        }
    }

    private static long pageSize() {
        Function f = find("getpagesize");
        try {
            return f == null ? -1 : f.invokeInt(new Object[0]);
        } catch (RuntimeException | UnsatisfiedLinkError e) {
            return -1;
        }
    }
}
