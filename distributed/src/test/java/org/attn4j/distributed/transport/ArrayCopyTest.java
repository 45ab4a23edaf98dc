package org.attn4j.distributed.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

class ArrayCopyTest {

    @Test
    void copiesBetweenContiguousViewsInCOrderLeavingTheRestAlone() {
        for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE, DataType.INT, DataType.HALF}) {
            INDArray from = Nd4j.linspace(1, 24, 24, DataType.DOUBLE).castTo(type).reshape(2, 3, 4);
            INDArray whole = Nd4j.zeros(type, 3 * 24);
            INDArray into = whole.get(NDArrayIndex.interval(24, 48));           // a view at an element offset
            ArrayCopy.copy(from.get(NDArrayIndex.point(1), NDArrayIndex.all(), NDArrayIndex.all()),
                    into.get(NDArrayIndex.interval(0, 12)));
            ArrayCopy.copy(from.get(NDArrayIndex.point(0), NDArrayIndex.all(), NDArrayIndex.all()),
                    into.get(NDArrayIndex.interval(12, 24)));
            INDArray expected = Nd4j.concat(0, from.reshape(24).get(NDArrayIndex.interval(12, 24)),
                    from.reshape(24).get(NDArrayIndex.interval(0, 12)));
            assertEquals(expected, into, type + ": the elements in C order");
            assertEquals(0.0, whole.get(NDArrayIndex.interval(0, 24)).sumNumber().doubleValue(), type + " before");
            assertEquals(0.0, whole.get(NDArrayIndex.interval(48, 72)).sumNumber().doubleValue(), type + " after");
        }
    }

    @Test
    void aStridedArrayIsCopiedElementByElement() {
        INDArray m = Nd4j.linspace(1, 12, 12, DataType.FLOAT).reshape(3, 4);
        INDArray column = m.get(NDArrayIndex.all(), NDArrayIndex.point(1));           // strided: 2, 6, 10
        INDArray into = Nd4j.zeros(DataType.FLOAT, 3);
        ArrayCopy.copy(column, into);
        assertEquals(Nd4j.createFromArray(2f, 6f, 10f), into);
        INDArray back = Nd4j.createFromArray(-1f, -2f, -3f);
        ArrayCopy.copy(back, column);
        assertEquals(Nd4j.createFromArray(1f, -1f, 3f, 4f, 5f, -2f, 7f, 8f, 9f, -3f, 11f, 12f), m.reshape(12));
    }

    @Test
    void overlappingRangesOfOneBufferAreCopiedAsIfThroughATemporary() {
        INDArray a = Nd4j.linspace(0, 9, 10, DataType.FLOAT);
        ArrayCopy.copy(a.get(NDArrayIndex.interval(0, 8)), a.get(NDArrayIndex.interval(2, 10)));
        assertEquals(Nd4j.createFromArray(0f, 1f, 0f, 1f, 2f, 3f, 4f, 5f, 6f, 7f), a);
        ArrayCopy.copy(a, a);
        assertEquals(Nd4j.createFromArray(0f, 1f, 0f, 1f, 2f, 3f, 4f, 5f, 6f, 7f), a, "onto itself");
    }

    @Test
    void refusesArraysOfAnotherTypeOrLength() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ArrayCopy.copy(Nd4j.create(DataType.FLOAT, 4), Nd4j.create(DataType.DOUBLE, 4)));
        assertTrue(e.getMessage().contains("4 FLOAT into 4 DOUBLE"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> ArrayCopy.copy(Nd4j.create(DataType.FLOAT, 4), Nd4j.create(DataType.FLOAT, 5)));
        assertTrue(e.getMessage().contains("4 FLOAT into 5 FLOAT"), e.getMessage());
    }
}
