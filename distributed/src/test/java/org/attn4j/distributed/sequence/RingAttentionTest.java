package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.collective.Communicator;
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

/** Ring attention on P in-JVM workers equals single-device flash attention on the same seeded inputs. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RingAttentionTest {

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (int p : new int[] {1, 2, 3, 4, 6, 8, 9}) {
            for (SequenceLayout layout : SequenceLayout.values()) {
                a.add(Arguments.of(p, layout, true, 0, 2));
                a.add(Arguments.of(p, layout, false, 0, 4));
            }
            a.add(Arguments.of(p, SequenceLayout.CONTIGUOUS, true, 7, 4));
            a.add(Arguments.of(p, SequenceLayout.ZIGZAG, false, 11, 2));
        }
        a.add(Arguments.of(8, SequenceLayout.CONTIGUOUS, true, 40, 2));     // shards stop after 3 of 8 steps
        a.add(Arguments.of(9, SequenceLayout.CONTIGUOUS, false, 30, 4));
        return a.stream();
    }

    @ParameterizedTest(name = "P={0} {1} causal={2} window={3} Hkv={4}")
    @MethodSource("cases")
    void matchesSingleDeviceAttention(int p, SequenceLayout layout, boolean causal, int window, int hkv)
            throws Exception {
        check(p, layout, causal, window, hkv, DataType.DOUBLE, 1e-12, 100L * p + layout.ordinal());
    }

    @Test
    void matchesSingleDeviceAttentionInFloat32() throws Exception {
        check(4, SequenceLayout.ZIGZAG, true, 0, 2, DataType.FLOAT, 1e-5, 7);
        check(3, SequenceLayout.STRIPED, false, 0, 4, DataType.FLOAT, 1e-5, 8);
    }

    private static void check(int p, SequenceLayout layout, boolean causal, int window, int hkv, DataType type,
                              double tol, long seed) throws Exception {
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
            RingAttention ring = new RingAttention(Communicator.world(t), layout, n, causal, window);
            int r = t.rank();
            INDArray lq = layout.shard(q, r, p);
            INDArray lk = layout.shard(k, r, p);
            INDArray lv = layout.shard(v, r, p);
            RingAttention.Forward out = ring.forward(lq, lk, lv, scale);
            AttentionGradients grad = ring.backward(lq, lk, lv, out, layout.shard(g, r, p), scale);
            return new INDArray[] {out.output(), out.lse(), grad.dq(), grad.dk(), grad.dv()};
        });
        String ctx = "P=" + p + " " + layout + " causal=" + causal + " window=" + window + " " + type + " seed "
                + seed;
        assertClose("O", layout.unshard(parts[0]), whole.output(), tol, ctx);
        assertClose("LSE", layout.unshard(parts[1]), whole.lse(), tol, ctx);
        assertClose("dQ", layout.unshard(parts[2]), wholeGrad.dq(), tol, ctx);
        assertClose("dK", layout.unshard(parts[3]), wholeGrad.dk(), tol, ctx);
        assertClose("dV", layout.unshard(parts[4]), wholeGrad.dv(), tol, ctx);
    }
}
