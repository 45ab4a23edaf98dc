package org.attn4j.distributed.training;

import com.sun.jna.Function;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Hands the memory pages of part of an ND4J array back to the operating system ({@code madvise(MADV_DONTNEED)}),
 * without freeing the array: DL4J's layers keep their views into one flat parameter vector and one flat gradient
 * vector, so ZeRO stages 2 and 3 cannot shrink those buffers, but they can drop the resident pages of the slices
 * this worker does not own. A released page reads as zeros until it is written again (the next all-gather of the
 * parameters, or the next backward pass for the gradients), when the kernel gives it a fresh page.
 *
 * <p>Only pages lying wholly inside the range are released, so the rest of the array and the allocator's own
 * bookkeeping around it are never touched. Linux (glibc) only: {@link #available()} says whether this process
 * can release pages at all.
 */
final class ResidentPages {

    private static final int MADV_DONTNEED = 4;
    private static final Function MADVISE = find("madvise");
    private static final long PAGE = pageSize();

    private ResidentPages() {
    }

    /** Whether pages can be released in this process (Linux with glibc). */
    static boolean available() {
        return MADVISE != null && PAGE > 0 && System.getProperty("os.name", "").toLowerCase().contains("linux");
    }

    /**
     * Releases the pages holding elements {@code [from, to)} of {@code flat}, a contiguous vector.
     *
     * @return the bytes released (whole pages inside the range)
     * @throws IllegalStateException if the call fails or pages cannot be released here
     */
    static long release(INDArray flat, long from, long to) {
        if (to <= from) {
            return 0;
        }
        if (!available()) {
            throw new IllegalStateException("ResidentPages: madvise is not available on "
                    + System.getProperty("os.name"));
        }
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
