package org.attn4j.ops.flash;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.Function;

import org.attn4j.ops.Views;
import org.attn4j.ops.flash.TilePath.Cause;
import org.attn4j.ops.flash.TilePath.Reason;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * {@link TileMath} for FLOAT tiles in native code (AVX-512), on the buffers' addresses, and the tile products the
 * kernels call instead of {@link org.attn4j.ops.Gemm} ({@link #productTransposed}, {@link #product}). The same
 * operations and results as {@link VectorTileMath} up to float32 rounding; the softmax step at about half its time
 * (0.17-0.20 against 0.50 ns a score of a 512 x 512 tile, measured here), the products without OpenBLAS's packing of
 * every operand on every call (tiles.c).
 *
 * <p>The library, {@code libattn4jtiles.so}, is built with the module on Linux x86-64 when gcc is present
 * ({@code src/main/c}) and carried in the jar; it is used when it loads and the CPU has AVX-512F. Otherwise, or
 * with {@code -Dattn4j.nativeTiles=false}, {@link TileMath#forType} takes the Java implementation; {@link TilePath}
 * says which and why.
 */
final class NativeTileMath implements TileMath {

    /** Where the build puts the library, inside the jar. */
    static final String RESOURCE = "/org/attn4j/ops/native/linux-x86_64/libattn4jtiles.so";

    /** Where the build writes why it did not build the library (src/main/c/build.sh), when it did not. */
    static final String NOT_BUILT = "/org/attn4j/ops/native/not-built.txt";

    /** Why this process cannot use the library, or null when it can (loaded, and the CPU has AVX-512F). */
    static final Reason UNAVAILABLE = load(System.getProperty("os.name", ""), System.getProperty("os.arch", ""),
            NativeTileMath.class::getResourceAsStream, System::load, NativeTileMath::supported);

    /** Masks are filled in Java: runs of -inf, no arithmetic. */
    private final TileMath masks;

    NativeTileMath(TileMath masks) {
        this.masks = masks;
    }

    @Override
    public double base() {
        return 2.0;
    }

    @Override
    public boolean softmaxStep(INDArray scores, int rows, int cols, double[] m, double[] alpha, double[] rowSum) {
        fits("tile", scores, 0, (long) rows * cols);
        rowValues(rows, m, alpha, rowSum);
        return softmaxStep(address(scores, 0), rows, cols, m, alpha, rowSum);
    }

    @Override
    public void expShifted(INDArray p, INDArray shifts, long at, int rows, int cols) {
        fits("tile", p, 0, (long) rows * cols);
        expShifted(address(p, 0), Views.get(shifts, at, rows), rows, cols);
    }

    @Override
    public void shiftedProduct(INDArray dp, INDArray p, INDArray shifts, long at, int rows, int cols) {
        fits("dP", dp, 0, (long) rows * cols);
        fits("P", p, 0, (long) rows * cols);
        shiftedProduct(address(dp, 0), address(p, 0), Views.get(shifts, at, rows), rows, cols);
    }

    @Override
    public void mask(INDArray tile, TilePlan plan, int b, int q0, int rows, int kb, int c0, int cols) {
        masks.mask(tile, plan, b, q0, rows, kb, c0, cols);
    }

    @Override
    public void scaleRows(INDArray m, int row0, double[] factors, int rows, int cols) {
        fits("rows", m, (long) row0 * cols, (long) rows * cols);
        rowValues(rows, factors);
        scaleRows(address(m, (long) row0 * cols), factors, rows, cols);
    }

    /** The native code reads (and writes) {@code rows} values of each array. */
    private static void rowValues(int rows, double[]... arrays) {
        for (double[] a : arrays) {
            if (a.length < rows) {
                throw new IllegalStateException("NativeTileMath: " + rows + " row values expected, got " + a.length);
            }
        }
    }

    /** Rows in a panel of a packed transpose ({@code PANEL} in tiles.c). */
    static final int PANEL = 32;

    /** Elements of the packed transpose of {@code rows} rows of width {@code d}, in blocks of {@code blockRows}. */
    static long packedLength(long rows, int d, long blockRows) {
        long full = rows / blockRows;
        long rest = rows % blockRows;
        return (full * panels(blockRows) + panels(rest)) * d * PANEL;
    }

    /** Where, in a packed transpose, block {@code block}'s column {@code col} (a multiple of 32) starts. */
    static long packedOffset(long block, long col, int d, long blockRows) {
        if (col % PANEL != 0) {
            throw new IllegalStateException("NativeTileMath: packed columns start at multiples of " + PANEL + ", not "
                    + col);
        }
        return (block * panels(blockRows) + col / PANEL) * d * PANEL;
    }

    private static long panels(long rows) {
        return (rows + PANEL - 1) / PANEL;
    }

    /**
     * Packs rows {@code [0, rows)} of width {@code d} (row stride {@code ld}, from element {@code off} of {@code k})
     * transposed, in blocks of {@code blockRows}, into {@code out} from element {@code outOff}.
     */
    static void packTransposed(INDArray k, long off, long ld, long rows, int d, long blockRows, INDArray out,
                               long outOff) {
        fits("K", k, off, (rows - 1) * ld + d);
        fits("packed", out, outOff, packedLength(rows, d, blockRows));
        packTransposed(address(k, off), ld, rows, d, blockRows, address(out, outOff));
    }

    /**
     * {@code C[rows x cols] = alpha A B^T}: A's rows of width {@code d} from element {@code aOff} (stride
     * {@code lda}), B^T packed ({@link #packTransposed}) from {@code btOff}, C from {@code cOff} (stride {@code ldc}).
     */
    static void productTransposed(INDArray a, long aOff, long lda, INDArray bt, long btOff, int d, INDArray c,
                                  long cOff, long ldc, int rows, int cols, double alpha) {
        fits("A", a, aOff, (rows - 1) * lda + d);
        fits("B^T", bt, btOff, panels(cols) * d * PANEL);
        fits("C", c, cOff, (rows - 1) * ldc + cols);
        productTransposed(address(a, aOff), lda, address(bt, btOff), d, address(c, cOff), ldc, rows, cols,
                (float) alpha);
    }

    /**
     * {@code C[rows x width] = alpha op(A) B (+ C when add)}: op(A)'s element (i, k) at {@code aOff + i ai + k ak}
     * ({@code ai = lda, ak = 1}: A as it lies; {@code ai = 1, ak = lda}: its transpose); B's rows of
     * {@code width} from {@code bOff} (stride {@code ldb}); C from {@code cOff} (stride {@code ldc}).
     */
    static void product(INDArray a, long aOff, long ai, long ak, INDArray b, long bOff, long ldb, INDArray c,
                        long cOff, long ldc, int rows, int width, int depth, double alpha, boolean add) {
        fits("A", a, aOff, (rows - 1) * ai + (depth - 1) * ak + 1);
        fits("B", b, bOff, (long) (depth - 1) * ldb + width);
        fits("C", c, cOff, (rows - 1) * ldc + width);
        product(address(a, aOff), ai, ak, address(b, bOff), ldb, address(c, cOff), ldc, rows, width, depth,
                (float) alpha, add);
    }

    /** Rows per group of {@link #intervalStep}: its scores buffer holds this many rows of the tile. */
    static final int INTERVAL_GROUP = 32;

    /**
     * The forward pass's online-softmax step on a partly masked tile whose visible keys form one run of columns per
     * row: row r of the tile sees columns {@code [from[r], to[r])} ({@link TilePlan#hiddenRuns} without padding).
     * Rows {@code rows} of Q from element {@code qOff} (width and stride {@code d}), the key block's K^T packed
     * from {@code ktOff}, its V rows from {@code vOff}; updates the tile rows' {@code m} and {@code l} and adds to
     * the accumulator's rows from {@code accOff} ({@code add}) or to zeros (the rows' first tile). Computes only the 32-column panels each group of
     * {@link #INTERVAL_GROUP} rows sees, in one native call (tiles.c, interval_step).
     */
    static void intervalStep(INDArray q, long qOff, INDArray kt, long ktOff, INDArray v, long vOff, INDArray acc,
                             long accOff, INDArray scores, int rows, int cols, int d, double scale, int[] from,
                             int[] to, double[] m, double[] l, boolean add) {
        fits("Q", q, qOff, (long) rows * d);
        fits("K^T", kt, ktOff, panels(cols) * d * PANEL);
        fits("V", v, vOff, (long) cols * d);
        fits("accumulator", acc, accOff, (long) rows * d);
        fits("scores", scores, 0, (long) Math.min(rows, INTERVAL_GROUP) * cols);
        rowValues(rows, m, l);
        if (from.length < rows || to.length < rows) {
            throw new IllegalStateException("NativeTileMath: " + rows + " column runs expected, got " + from.length);
        }
        for (int r = 0; r < rows; r++) {
            if (from[r] < 0 || to[r] > cols) {
                throw new IllegalStateException("NativeTileMath: row " + r + " sees columns [" + from[r] + ", "
                        + to[r] + ") of a tile of " + cols);
            }
        }
        intervalStep(address(q, qOff), d, address(kt, ktOff), d, address(v, vOff), d, address(acc, accOff), d,
                address(scores, 0), rows, cols, INTERVAL_GROUP, (float) scale, from, to, m, l, add);
    }

    /**
     * Decoding attention, one query per head (tiles.c, decode_heads): the {@code group} query rows of {@code q} from
     * element {@code qOff} (width and stride {@code d}) that share one key/value head attend to its rows
     * {@code [lo, hi)} of {@code k} and {@code v} from element {@code kvOff}; writes their outputs to {@code out}
     * from {@code outOff} and the natural log-sum-exp (scale applied) to {@code lse} from {@code lseOff}.
     * {@code scores} holds {@code group * (hi - lo)} floats of scratch.
     */
    static void decodeHeads(INDArray q, long qOff, INDArray k, INDArray v, long kvOff, int d, long lo, long hi,
                            int group, double scale, INDArray scores, INDArray out, long outOff, INDArray lse,
                            long lseOff) {
        fits("Q", q, qOff, (long) group * d);
        fits("K", k, kvOff, hi * d);
        fits("V", v, kvOff, hi * d);
        fits("scores", scores, 0, (long) group * Math.max(0, hi - lo));
        fits("output", out, outOff, (long) group * d);
        fits("LSE", lse, lseOff, group);
        if (lo < 0 || d < 1 || group < 1) {
            throw new IllegalStateException("NativeTileMath: decodeHeads got keys from " + lo + ", d " + d
                    + ", group " + group);
        }
        decodeHeads(address(q, qOff), address(k, kvOff), address(v, kvOff), d, lo, hi, group, (float) scale,
                address(scores, 0), address(out, outOff), address(lse, lseOff));
    }

    /** Native code reads and writes raw memory: a block past its buffer's end must fail here. */
    private static void fits(String name, INDArray x, long offset, long size) {
        if (offset < 0 || size < 0 || offset + size > x.data().length()) {
            throw new IllegalStateException("NativeTileMath: block " + name + " of " + size + " elements at offset "
                    + offset + " does not fit its buffer of " + x.data().length());
        }
    }

    /** The address of element {@code element} of an offset-free FLOAT array's buffer. */
    private static long address(INDArray a, long element) {
        if (a.offset() != 0 || a.dataType() != DataType.FLOAT) {
            throw new IllegalStateException("NativeTileMath: offset-free FLOAT buffers expected, got offset "
                    + a.offset() + ", " + a.dataType());
        }
        return a.data().addressPointer().address() + element * Float.BYTES;
    }

    /**
     * Copies the library out of the jar into a temporary file and loads it. The host, the jar's resources, the loader
     * and the CPU check are arguments so that a test can give each failure.
     *
     * @param os        the value of {@code os.name}
     * @param arch      the value of {@code os.arch}
     * @param resources opens a resource of the jar by absolute name, or returns null when it is absent
     * @param loader    {@link System#load}
     * @param avx512f   whether the CPU has AVX-512F, asked once the library is loaded
     * @return null when the library is usable, else why not
     */
    static Reason load(String os, String arch, Function<String, InputStream> resources, Consumer<String> loader,
                       BooleanSupplier avx512f) {
        if (!os.startsWith("Linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            return new Reason(Cause.NOT_LINUX_X86_64, "it is built for Linux x86-64 only, this is " + os + " " + arch);
        }
        String tmp = System.getProperty("java.io.tmpdir");
        try (InputStream in = resources.apply(RESOURCE)) {
            if (in == null) {
                return notBuilt(resources);
            }
            Path file = Files.createTempFile("attn4jtiles", ".so");
            try {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                loader.accept(file.toString());
            } finally {
                // Once loaded, the library stays mapped; the file is not needed.
                Files.deleteIfExists(file);
            }
        } catch (IOException e) {
            return new Reason(Cause.LOAD_FAILED, "libattn4jtiles.so could not be copied out of the jar into " + tmp
                    + ": " + e);
        } catch (LinkageError | SecurityException e) {
            return new Reason(Cause.LOAD_FAILED, "libattn4jtiles.so did not load: " + e.getMessage()
                    + loadHint(String.valueOf(e.getMessage()), tmp));
        }
        return avx512f.getAsBoolean() ? null : new Reason(Cause.NO_AVX512F,
                "this CPU has no AVX-512F (libattn4jtiles.so loaded, but its code needs AVX-512F)");
    }

    /** What to do about the loader's two usual complaints. */
    private static String loadHint(String message, String tmp) {
        if (message.contains("failed to map segment") || message.contains("Operation not permitted")) {
            return " (is the temporary directory " + tmp + " mounted noexec? -Djava.io.tmpdir=DIR picks another)";
        }
        if (message.contains("GLIBC_")) {
            return " (this system's C library is older than the one it was built against: build attn4j on this "
                    + "system)";
        }
        return "";
    }

    /** Why the jar has no library: the build's note (build.sh), or that its gcc step did not run or failed. */
    private static Reason notBuilt(Function<String, InputStream> resources) {
        String why = "its gcc step was skipped or failed";
        try (InputStream note = resources.apply(NOT_BUILT)) {
            if (note != null) {
                why = new String(note.readAllBytes(), StandardCharsets.UTF_8).strip();
            }
        } catch (IOException e) {
            // The note only explains; without it the general reason stands.
        }
        return new Reason(Cause.NOT_BUILT, "libattn4jtiles.so is not in this build: " + why
                + " (the build output says more)");
    }

    private static native boolean supported();

    private static native boolean softmaxStep(long tile, int rows, int cols, double[] m, double[] alpha,
                                              double[] rowSum);

    private static native void expShifted(long p, double[] shifts, int rows, int cols);

    private static native void shiftedProduct(long dp, long p, double[] shifts, int rows, int cols);

    private static native void scaleRows(long m, double[] factors, int rows, int cols);

    private static native void packTransposed(long k, long ld, long rows, int d, long blockRows, long out);

    private static native void productTransposed(long a, long lda, long bt, int d, long c, long ldc, int rows,
                                                 int cols, float alpha);

    private static native void intervalStep(long q, long ldq, long kt, int d, long v, long ldv, long acc,
                                            long ldacc, long scores, int rows, int cols, int group, float scale,
                                            int[] from, int[] to, double[] m, double[] l, boolean add);

    private static native void decodeHeads(long q, long k, long v, int d, long lo, long hi, int group, float scale,
                                           long scores, long out, long lse);

    private static native void product(long a, long ai, long ak, long b, long ldb, long c, long ldc, int rows,
                                       int width, int depth, float alpha, boolean add);
}
