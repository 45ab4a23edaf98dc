package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/** WallFacer attention on P in-JVM workers (teams of C) equals single-device flash attention. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class WallFacerAttentionTest {

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        int[][] pc = {{1, 1}, {2, 1}, {3, 1}, {4, 1}, {4, 2}, {6, 1}, {8, 1}, {8, 2}, {9, 1}, {9, 3}};
        for (int[] x : pc) {
            a.add(Arguments.of(x[0], x[1], SequenceLayout.ZIGZAG, true, 0, 2));
            a.add(Arguments.of(x[0], x[1], SequenceLayout.CONTIGUOUS, false, 0, 4));
        }
        a.add(Arguments.of(4, 2, SequenceLayout.ZIGZAG, true, 0, 4));
        a.add(Arguments.of(8, 2, SequenceLayout.CONTIGUOUS, false, 0, 2));
        a.add(Arguments.of(8, 2, SequenceLayout.STRIPED, true, 21, 2));
        a.add(Arguments.of(4, 2, SequenceLayout.CONTIGUOUS, true, 30, 4));
        return a.stream();
    }

    @ParameterizedTest(name = "P={0} C={1} {2} causal={3} window={4} Hkv={5}")
    @MethodSource("cases")
    void matchesSingleDeviceAttention(int p, int c, SequenceLayout layout, boolean causal, int window, int hkv)
            throws Exception {
        check(p, c, layout, causal, window, hkv, DataType.DOUBLE, 1e-12, 100L * p + 10L * c + layout.ordinal());
    }

    @Test
    void matchesSingleDeviceAttentionInFloat32() throws Exception {
        check(8, 2, SequenceLayout.ZIGZAG, true, 0, 2, DataType.FLOAT, 1e-5, 7);
        check(4, 1, SequenceLayout.CONTIGUOUS, false, 0, 4, DataType.FLOAT, 1e-5, 8);
    }

    @Test
    void refusesATeamSizeWhoseSquareDoesNotDivideP() {
        try (Ranks ranks = Ranks.inJvm(6, Duration.ofSeconds(5))) {
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> new WallFacerAttention(ranks.transport(0), 2, SequenceLayout.ZIGZAG, 144, true, 0));
            assertTrue(e.getMessage().contains("C^2 must divide P"), e.getMessage());
        }
    }

    private static void check(int p, int c, SequenceLayout layout, boolean causal, int window, int hkv,
                              DataType type, double tol, long seed) throws Exception {
        int n = 144;
        int d = 8;
        INDArray q = randn(seed, type, 2, 4, n, d);
        INDArray k = randn(seed + 1, type, 2, hkv, n, d);
        INDArray v = randn(seed + 2, type, 2, hkv, n, d);
        INDArray g = randn(seed + 3, type, 2, 4, n, d);
        double scale = FlashAttention.defaultScale(d);
        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, mask, scale);
        AttentionGradients wholeGrad = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g,
                mask, scale);

        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            WallFacerAttention ring = new WallFacerAttention(t, c, layout, n, causal, window);
            int r = t.rank();
            INDArray lq = layout.shard(q, r, p);
            INDArray lk = layout.shard(k, r, p);
            INDArray lv = layout.shard(v, r, p);
            RingAttention.Forward out = ring.forward(lq, lk, lv, scale);
            AttentionGradients grad = ring.backward(lq, lk, lv, out, layout.shard(g, r, p), scale);
            return new INDArray[] {out.output(), out.lse(), grad.dq(), grad.dk(), grad.dv()};
        });
        String ctx = "P=" + p + " C=" + c + " " + layout + " causal=" + causal + " window=" + window + " " + type
                + " seed " + seed;
        assertClose("O", layout.unshard(parts[0]), whole.output(), tol, ctx);
        assertClose("LSE", layout.unshard(parts[1]), whole.lse(), tol, ctx);
        assertClose("dQ", layout.unshard(parts[2]), wholeGrad.dq(), tol, ctx);
        assertClose("dK", layout.unshard(parts[3]), wholeGrad.dk(), tol, ctx);
        assertClose("dV", layout.unshard(parts[4]), wholeGrad.dv(), tol, ctx);
    }
}
