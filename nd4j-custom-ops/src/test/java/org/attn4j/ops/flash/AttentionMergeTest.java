package org.attn4j.ops.flash;

import static org.attn4j.ops.flash.Arrays4.assertClose;
import static org.attn4j.ops.flash.Arrays4.randn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import org.attn4j.ops.testing.ReferenceAttention;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** The partial-result merge against a full softmax over all keys. */
class AttentionMergeTest {

    @Test
    void mergingTwoKeyHalvesEqualsFullSoftmax() {
        checkSplit(21, new int[] {0, 64, 113}, false, DataType.DOUBLE, 1e-13);
        checkSplit(22, new int[] {0, 50, 113}, true, DataType.DOUBLE, 1e-13);
        checkSplit(23, new int[] {0, 64, 113}, true, DataType.FLOAT, 1e-6);
    }

    @Test
    void mergingManyBlocksInAnyOrderEqualsFullSoftmax() {
        checkSplit(31, new int[] {0, 9, 30, 31, 77, 100, 203}, true, DataType.DOUBLE, 1e-13);
        checkSplit(32, new int[] {0, 1, 2, 3, 100, 203}, false, DataType.DOUBLE, 1e-13);
    }

    @Test
    void staysFiniteForScoresThatOverflowTheNaiveForm() {
        // LSE near 1000: exp(LSE) overflows double; the stable form must not.
        INDArray o1 = Nd4j.ones(DataType.DOUBLE, 1, 1, 2, 3);
        INDArray o2 = Nd4j.ones(DataType.DOUBLE, 1, 1, 2, 3).muli(3);
        INDArray l1 = Nd4j.createFromArray(1000.0, Double.NEGATIVE_INFINITY).reshape(1, 1, 2);
        INDArray l2 = Nd4j.createFromArray(1000.0, Double.NEGATIVE_INFINITY).reshape(1, 1, 2);
        AttentionOutput m = AttentionMerge.merge(new AttentionOutput(o1, l1), new AttentionOutput(o2, l2));
        assertEquals(2.0, m.output().getDouble(0, 0, 0, 0), 1e-12);
        assertEquals(1000.0 + Math.log(2), m.lse().getDouble(0, 0, 0), 1e-12);
        assertEquals(0.0, m.output().getDouble(0, 0, 1, 0));
        assertEquals(Double.NEGATIVE_INFINITY, m.lse().getDouble(0, 0, 1));
    }

    @Test
    void rejectsPartialsOfDifferentShapes() {
        AttentionOutput a = new AttentionOutput(Nd4j.zeros(1, 1, 2, 3), Nd4j.zeros(1, 1, 2));
        AttentionOutput b = new AttentionOutput(Nd4j.zeros(1, 1, 3, 3), Nd4j.zeros(1, 1, 3));
        assertThrows(IllegalArgumentException.class, () -> AttentionMerge.merge(a, b));
    }

    private static void checkSplit(long seed, int[] bounds, boolean causal, DataType type, double tol) {
        int n = bounds[bounds.length - 1];
        INDArray q = randn(seed, type, 2, 4, n, 16);
        INDArray k = randn(seed + 1, type, 2, 2, n, 16);
        INDArray v = randn(seed + 2, type, 2, 2, n, 16);
        AttentionMask mask = AttentionMask.builder().causal(causal).build();
        // The yardstick is a plain float64 softmax over all keys, not the op under test.
        ReferenceAttention ref = new ReferenceAttention(q, k, v, null, mask, FlashAttention.defaultScale(16));
        AttentionOutput full = new AttentionOutput(ref.output(), ref.lse());
        List<AttentionOutput> parts = new ArrayList<>();
        for (int p = 0; p + 1 < bounds.length; p++) {
            int[] kPos = new int[bounds[p + 1] - bounds[p]];
            for (int j = 0; j < kPos.length; j++) {
                kPos[j] = bounds[p] + j;
            }
            AttentionMask partMask = mask.toBuilder().keyPositions(kPos).build();
            INDArray kp = k.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(bounds[p], bounds[p + 1]),
                    NDArrayIndex.all());
            INDArray vp = v.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(bounds[p], bounds[p + 1]),
                    NDArrayIndex.all());
            parts.add(FlashAttention.defaults().forward(q, kp, vp, partMask));
        }
        Collections.shuffle(parts, new Random(seed));
        AttentionOutput merged = parts.get(0);
        for (int p = 1; p < parts.size(); p++) {
            merged = AttentionMerge.merge(merged, parts.get(p));
        }
        assertClose("O", merged.output(), full.output(), tol, "seed " + seed);
        assertClose("LSE", merged.lse(), full.lse(), tol, "seed " + seed);
    }
}
