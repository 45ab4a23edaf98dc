package org.attn4j.ops;

import java.util.HashMap;
import java.util.Map;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Per-thread scratch matrices that live across calls: an ND4J allocation costs about 0.1 ms here (measured),
 * which dominated short calls when every call allocated its tile buffers afresh. A kernel asks for a slot;
 * contents are undefined on return, so every user overwrites what it reads. Two kernels on one thread must not
 * be active at once with the same slot (kernels run one at a time per worker thread). Internal to attn4j.
 */
public final class Scratch {

    private static final ThreadLocal<Map<Long, INDArray>> BUFFERS = ThreadLocal.withInitial(HashMap::new);
    private static final ThreadLocal<INDArray[]> FLAT = ThreadLocal.withInitial(() -> new INDArray[4]);

    /** The largest flat buffer kept for the next call (16 MB of floats); larger ones are allocated per call. */
    public static final long MAX_KEPT_BYTES = 16L << 20;

    private Scratch() {
    }

    /**
     * This thread's {@code rows x cols} matrix of {@code type} for {@code slot}, allocated on first use.
     *
     * @param slot 0 to 15, distinct per concurrent use within one kernel
     */
    public static INDArray matrix(int slot, DataType type, int rows, int cols) {
        long key = ((long) slot << 59) | ((long) type.ordinal() << 54) | ((long) rows << 27) | cols;
        return BUFFERS.get().computeIfAbsent(key, k -> detached(type, rows, cols));
    }

    /**
     * This thread's flat buffer of {@code type} for {@code slot} with at least {@code length} elements (it may be
     * longer), kept for the next call while it is at most {@link #MAX_KEPT_BYTES}, else allocated for this call only.
     * For the per-call copies a caller makes before its workers start (packed keys); contents are undefined.
     *
     * @param slot 0 to 3, distinct per concurrent use on one thread
     */
    public static INDArray flat(int slot, DataType type, long length) {
        INDArray[] kept = FLAT.get();
        INDArray b = kept[slot];
        if (b != null && b.dataType() == type && b.length() >= length) {
            return b;
        }
        INDArray fresh;
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            fresh = Nd4j.createUninitialized(type, length);
        }
        if (length * type.width() <= MAX_KEPT_BYTES) {
            kept[slot] = fresh;
        }
        return fresh;
    }

    /**
     * Allocated outside any workspace: a buffer first made while a DL4J workspace is open would belong to that
     * workspace and be invalid once it closes ("outdated workspace pointer"), yet it lives across calls here.
     */
    private static INDArray detached(DataType type, int rows, int cols) {
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            return Nd4j.create(type, rows, cols);
        }
    }
}
