package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * A single query per head in float32 runs the native decoding kernel (each key/value head read once for its group
 * of query heads); its output and log-sum-exp equal the same attention in float64 (the tiled kernel) to float32's
 * precision: head sizes with and without a partial last vector (40, 64, 128), GQA groups of 1 and 3, a key/value
 * cache read in place, causal and windowed masks at any positions, a query that sees no key, and keys whose
 * visible ones are not one run (which the tiled kernel takes).
 */
class DecodeAttentionTest {

    @ParameterizedTest(name = "D {0}, heads {1} over {2}, {3} keys, query at {4}, window {5}")
    @CsvSource({
        "64, 9, 3, 300, 299, 0",
        "64, 4, 4, 257, 400, 0",
        "40, 6, 2, 100, 60, 0",
        "128, 6, 2, 129, 128, 50",
        "64, 6, 3, 80, 79, 1",
    })
    void equalsTheFloat64Attention(int d, int heads, int kvHeads, int keys, int query, int window) {
        assumeTrue(TilePath.current().nativeInUse(), "native tile code not in use here");
        Nd4j.getRandom().setSeed(11);
        int batch = 2;
        int room = keys + 7;                                          // a cache with room to grow, read in place
        INDArray kBuffer = Nd4j.randn(DataType.FLOAT, batch, kvHeads, room, d);
        INDArray vBuffer = Nd4j.randn(DataType.FLOAT, batch, kvHeads, room, d);
        INDArray k = kBuffer.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(0, keys),
                NDArrayIndex.all());
        INDArray v = vBuffer.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(0, keys),
                NDArrayIndex.all());
        INDArray q = Nd4j.randn(DataType.FLOAT, batch, heads, 1, d);
        AttentionMask mask = AttentionMask.builder().causal(true).window(window).queryPositions(new int[] {query})
                .build();
        assertArrayEquals(expectedRun(keys, query, window), FlashAttention.visibleRun(mask, keys));
        AttentionOutput f = FlashAttention.defaults().forward(q, k, v, mask, 0.2);
        AttentionOutput e = FlashAttention.defaults().forward(q.castTo(DataType.DOUBLE), k.castTo(DataType.DOUBLE),
                v.castTo(DataType.DOUBLE), mask, 0.2);
        assertClose(e.output(), f.output(), "output");
        assertClose(e.lse(), f.lse(), "log-sum-exp");
    }

    private static int[] expectedRun(int keys, int query, int window) {
        int hi = Math.min(keys, query + 1);
        int lo = window > 0 ? Math.max(0, query - window + 1) : 0;
        return new int[] {lo, Math.max(lo, hi)};
    }

    @Test
    void aQueryBeforeEveryKeySeesNothing() {
        assumeTrue(TilePath.current().nativeInUse(), "native tile code not in use here");
        INDArray k = Nd4j.randn(DataType.FLOAT, 1, 1, 20, 64);
        AttentionMask mask = AttentionMask.builder().causal(true).queryPositions(new int[] {3})
                .keyPositions(java.util.stream.IntStream.range(10, 30).toArray()).build();
        assertArrayEquals(new int[] {0, 0}, FlashAttention.visibleRun(mask, 20));
        AttentionOutput f = FlashAttention.defaults().forward(Nd4j.randn(DataType.FLOAT, 1, 2, 1, 64), k, k.dup(),
                mask, 0.125);
        assertEquals(0.0, f.output().amaxNumber().doubleValue());
        assertEquals(Double.NEGATIVE_INFINITY, f.lse().maxNumber().doubleValue());
    }

    @Test
    void keysThatAreNotOneRunGoToTheTiledKernelAndStayExact() {
        int[] positions = {5, 0, 9, 1, 7, 2, 3, 8};                 // query at 4 sees indices 1, 3, 5, 6
        AttentionMask mask = AttentionMask.builder().causal(true).queryPositions(new int[] {4}).keyPositions(positions)
                .build();
        assertNull(FlashAttention.visibleRun(mask, positions.length));
        INDArray q = Nd4j.randn(DataType.FLOAT, 1, 2, 1, 16);
        INDArray k = Nd4j.randn(DataType.FLOAT, 1, 1, 8, 16);
        INDArray v = Nd4j.randn(DataType.FLOAT, 1, 1, 8, 16);
        AttentionOutput f = FlashAttention.defaults().forward(q, k, v, mask, 0.25);
        AttentionOutput e = FlashAttention.defaults().forward(q.castTo(DataType.DOUBLE), k.castTo(DataType.DOUBLE),
                v.castTo(DataType.DOUBLE), mask, 0.25);
        assertClose(e.output(), f.output(), "output");
    }

    private static void assertClose(INDArray expected, INDArray actual, String what) {
        double error = actual.castTo(DataType.DOUBLE).sub(expected).amaxNumber().doubleValue();
        double scale = Math.max(1, expected.amaxNumber().doubleValue());
        assertTrue(error <= 2e-5 * scale, what + ": largest difference " + error);
    }
}
