package org.attn4j.ops.flash;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.attn4j.ops.Scratch;

/**
 * K^T (or V^T) packed once per call for the native tile products ({@link NativeTileMath#productTransposed}): one
 * region per (batch, kv head), each key block's rows in panels of 32. As large as the keys themselves.
 */
final class PackedTranspose {

    /** Below this many queries per head the packing (one pass over the keys) would cost more than it saves. */
    static final int MIN_QUERIES = 32;

    private final INDArray data;
    private final long perHead;
    private final int d;
    private final int blockRows;

    private PackedTranspose(INDArray data, long perHead, int d, int blockRows) {
        this.data = data;
        this.perHead = perHead;
        this.d = d;
        this.blockRows = blockRows;
    }

    /** Whether the kernels use the native products for these shapes (FLOAT, the native tile math in use). */
    static boolean applies(AttentionShapes s) {
        return s.dataType() == DataType.FLOAT && s.queries() >= MIN_QUERIES
                && TileMath.forType(DataType.FLOAT) instanceof NativeTileMath;
    }

    /**
     * Packs the first {@code s.keys()} rows of every (batch, kv head) of {@code k}, whose heads lie
     * {@code rowsPerHead} rows apart, in blocks of {@code blockRows}, into this thread's scratch {@code slot}.
     */
    static PackedTranspose of(INDArray k, long rowsPerHead, AttentionShapes s, int blockRows, int slot) {
        int d = s.headDim();
        long perHead = NativeTileMath.packedLength(s.keys(), d, blockRows);
        int heads = s.batch() * s.kvHeads();
        // Kept on the calling thread for the next call while small: an ND4J allocation of a few MB costs 0.2-1 ms
        // here, as much as the whole forward pass's causal savings at N = 4096.
        INDArray data = Scratch.flat(slot, DataType.FLOAT, heads * perHead);
        for (int h = 0; h < heads; h++) {
            NativeTileMath.packTransposed(k, h * rowsPerHead * d, d, s.keys(), d, blockRows, data, h * perHead);
        }
        return new PackedTranspose(data, perHead, d, blockRows);
    }

    INDArray data() {
        return data;
    }

    /** Where column {@code col} (a multiple of 32) of key block {@code block} of (batch, kv head) {@code bh} starts. */
    long offset(int bh, int block, int col) {
        return bh * perHead + NativeTileMath.packedOffset(block, col, d, blockRows);
    }
}
