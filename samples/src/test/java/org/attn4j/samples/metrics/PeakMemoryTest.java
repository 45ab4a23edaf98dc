package org.attn4j.samples.metrics;

import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** The peak is the operating system's count, so it sees ND4J's off-heap buffers, even freed ones. */
class PeakMemoryTest {

    @Test
    void seesAnOffHeapBufferThatWasFreedBeforeTheEnd() {
        PeakMemory.collectGarbage();
        PeakMemory memory = PeakMemory.start();
        INDArray a = Nd4j.create(DataType.FLOAT, 25_000_000L).assign(1f);  // 100 MB, every page touched
        a.close();
        PeakMemory.Reading r = memory.stop();
        // Part of the buffer may land on pages the process already holds from earlier tests (freed to malloc, not
        // to the system), which do not raise the peak; most of 100 MB still must.
        assertTrue(r.increaseBytes() >= 50_000_000L, "rise " + r.increaseBytes() + " bytes; " + r.measure());
        assertTrue(r.increaseBytes() < 400_000_000L, "rise " + r.increaseBytes() + " bytes; " + r.measure());
    }
}
