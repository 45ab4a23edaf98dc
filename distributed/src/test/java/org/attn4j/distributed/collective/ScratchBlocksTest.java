package org.attn4j.distributed.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

class ScratchBlocksTest {

    @Test
    void anArrayHandedBackIsTakenAgainForTheSameTypeAndLength() {
        ScratchBlocks s = new ScratchBlocks();
        INDArray a = s.take(DataType.FLOAT, 1000);
        assertEquals(1000, a.length());
        s.give(a);
        assertEquals(4000, s.retained());
        assertNotSame(a, s.take(DataType.DOUBLE, 1000), "another type gets its own array");
        assertNotSame(a, s.take(DataType.FLOAT, 999), "another length gets its own array");
        assertSame(a, s.take(DataType.FLOAT, 1000));
        assertEquals(0, s.retained(), "taken again: no longer kept");
        assertNotSame(a, s.take(DataType.FLOAT, 1000), "one taker at a time");
    }

    @Test
    void keepsAtMostItsLimitFreeingTheArraysKeptLongestFirst() {
        ScratchBlocks s = new ScratchBlocks();
        long quarter = ScratchBlocks.RETAINED_BYTES / 4 / 4;
        INDArray[] a = new INDArray[5];
        for (int i = 0; i < a.length; i++) {
            a[i] = s.take(DataType.FLOAT, quarter + i);
        }
        for (INDArray x : a) {
            s.give(x);
        }
        assertTrue(s.retained() <= ScratchBlocks.RETAINED_BYTES, s.retained() + " bytes kept");
        assertTrue(a[0].wasClosed(), "the first kept is freed to make room");
        assertTrue(!a[4].wasClosed());
        assertSame(a[4], s.take(DataType.FLOAT, quarter + 4));
        INDArray big = s.take(DataType.BYTE, ScratchBlocks.RETAINED_BYTES + 1);
        s.give(big);
        assertTrue(big.wasClosed(), "an array over the limit is freed at once");
    }
}
