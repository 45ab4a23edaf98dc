package org.attn4j.distributed.transport;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** How an array's elements are reached as bytes, without leaving off-heap memory. */
final class ArrayBytes {

    private ArrayBytes() {
    }

    /**
     * Checks that {@code array} can travel: not null, of a type {@link MessageDescriptor} carries, of at most
     * {@link MessageDescriptor#MAX_ARRAY_RANK} dimensions, and no larger than {@code maxBytes}.
     *
     * @throws IllegalArgumentException naming {@code who} and the offending value
     */
    static void checkSendable(String who, INDArray array, long maxBytes) {
        if (array == null) {
            throw new IllegalArgumentException(who + ": array is null");
        }
        if (!MessageDescriptor.carries(array.dataType())) {
            throw new IllegalArgumentException(who + ": array type " + array.dataType()
                    + " is not carried; use one of " + MessageDescriptor.carriedTypes());
        }
        if (array.rank() > MessageDescriptor.MAX_ARRAY_RANK) {
            throw new IllegalArgumentException(who + ": array has " + array.rank() + " dimensions, more than "
                    + MessageDescriptor.MAX_ARRAY_RANK);
        }
        long bytes = byteLength(array);
        if (bytes > maxBytes) {
            throw new IllegalArgumentException(who + ": array has " + bytes + " bytes, more than the limit of "
                    + maxBytes + " bytes per message");
        }
    }

    /** The bytes of the array's elements. */
    static long byteLength(INDArray array) {
        return array.isEmpty() ? 0 : array.length() * array.dataType().width();
    }

    /**
     * The array itself when its elements are contiguous in C order (a fresh array, or a view such as a row block
     * or a reshape), otherwise a {@link #detachedCopy}.
     */
    static INDArray contiguous(INDArray array) {
        if (array.isEmpty() || Contiguity.isCContiguous(array)) {
            return array;
        }
        return detachedCopy(array);
    }



    /**
     * A C-ordered copy outside any workspace: the caller's workspace may be reset while the copy is still in
     * flight or held by the receiver.
     */
    static INDArray detachedCopy(INDArray array) {
        MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces();
        try {
            return array.dup('c');
        } finally {
            outside.close();
        }
    }

    /**
     * The elements of a {@link #contiguous} array as a direct buffer over ND4J's memory (no copy), native byte
     * order, position 0, limit the byte length. ND4J's {@code asNio()} of a view spans the whole backing buffer,
     * so the view's element offset picks the slice.
     */
    static ByteBuffer bytes(INDArray contiguous) {
        if (contiguous.isEmpty()) {
            return ByteBuffer.allocateDirect(0);
        }
        long width = contiguous.dataType().width();
        ByteBuffer whole = contiguous.data().asNio();
        long from = contiguous.offset() * width;
        long length = byteLength(contiguous);
        if (from + length > whole.capacity()) {
            throw new IllegalStateException("ArrayBytes: array of " + length + " bytes at byte offset " + from
                    + " does not fit its buffer of " + whole.capacity() + " bytes");
        }
        return whole.slice((int) from, (int) length).order(ByteOrder.nativeOrder());
    }
}
