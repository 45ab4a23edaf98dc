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
     * Allocated outside any workspace: a buffer first made while a DL4J workspace is open would belong to that
     * workspace and be invalid once it closes ("outdated workspace pointer"), yet it lives across calls here.
     */
    private static INDArray detached(DataType type, int rows, int cols) {
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            return Nd4j.create(type, rows, cols);
        }
    }
}
