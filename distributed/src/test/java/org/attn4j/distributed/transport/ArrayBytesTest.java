package org.attn4j.distributed.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** Which arrays are sent in place and which are copied first, and that the bytes in place are the right ones. */
class ArrayBytesTest {

    @Test
    void sendsContiguousViewsInPlaceAndCopiesTheOthers() {
        INDArray vector = Nd4j.arange(0, 100).castTo(DataType.FLOAT);
        INDArray interval = vector.get(NDArrayIndex.interval(40, 60));
        INDArray matrix = Nd4j.arange(0, 60).castTo(DataType.FLOAT).reshape(6, 10);
        INDArray rows = matrix.get(NDArrayIndex.interval(2, 4), NDArrayIndex.all());
        INDArray column = matrix.get(NDArrayIndex.all(), NDArrayIndex.point(3));
        INDArray block = matrix.get(NDArrayIndex.all(), NDArrayIndex.interval(0, 5));
        assertSame(interval, ArrayBytes.contiguous(interval));
        assertSame(rows, ArrayBytes.contiguous(rows));
        assertNotSame(column, ArrayBytes.contiguous(column));
        assertNotSame(block, ArrayBytes.contiguous(block));
        assertFalse(Contiguity.isCContiguous(matrix.transpose()));
        assertTrue(Contiguity.isCContiguous(matrix.reshape(6, 1, 10)));
        // The bytes of an interval are its own elements, not the start of the buffer it views.
        ByteBuffer b = ArrayBytes.bytes(ArrayBytes.contiguous(interval));
        assertEquals(20 * 4, b.remaining());
        assertEquals(40f, b.getFloat(0));
        assertEquals(59f, b.getFloat(19 * 4));
        ByteBuffer r = ArrayBytes.bytes(ArrayBytes.contiguous(rows));
        assertEquals(20f, r.getFloat(0));
        assertEquals(39f, r.getFloat(19 * 4));
    }
}
