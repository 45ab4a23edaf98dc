package org.attn4j.ops.flash;

import org.attn4j.ops.Scratch;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * One key block's K^T (or V^T) packed for the native tile products ({@link NativeTileMath#productTransposed}), in
 * the calling thread's scratch: panels of 32 keys. A kernel packs a block when it starts on it (a gather per 16
 * values, a few microseconds for 512 x 64 against half a millisecond for the tile), so no copy of the whole K is
 * made and memory stays O(tile).
 */
final class PackedTranspose {

    /** Below this many queries per head the packing (one pass over the block's keys) would cost more than it saves. */
    static final int MIN_QUERIES = 32;

    private PackedTranspose() {
    }

    /** Whether the kernels use the native products for these shapes (FLOAT, the native tile math in use). */
    static boolean applies(AttentionShapes s) {
        return s.dataType() == DataType.FLOAT && s.queries() >= MIN_QUERIES
                && TileMath.forType(DataType.FLOAT) instanceof NativeTileMath;
    }

    /**
     * Whether kernels with these products ({@code packed}) run without ND4J's or OpenBLAS's native threads, so need
     * no pinning of them: true with the native products and the Java masks; the ND4J masks (without the Vector API
     * module) are ND4J operations.
     */
    static boolean withoutNativeThreads(boolean packed) {
        return packed && TilePath.cpuKernel().vectorInUse();
    }

    /**
     * Rows {@code [0, rows)} of width {@code d} starting at element {@code off} of {@code k} packed into this
     * thread's scratch {@code slot} (sized for {@code maxRows}), returned.
     */
    static INDArray block(int slot, INDArray k, long off, int rows, int d, int maxRows) {
        int panels = (maxRows + NativeTileMath.PANEL - 1) / NativeTileMath.PANEL;
        INDArray out = Scratch.matrix(slot, DataType.FLOAT, panels * d, NativeTileMath.PANEL);
        NativeTileMath.packTransposed(k, off, d, rows, d, rows, out, 0);
        return out;
    }

    /** Where column {@code col} (a multiple of 32) of a packed block starts. */
    static long offset(int col, int d) {
        return NativeTileMath.packedOffset(0, col, d, NativeTileMath.PANEL);
    }
}
