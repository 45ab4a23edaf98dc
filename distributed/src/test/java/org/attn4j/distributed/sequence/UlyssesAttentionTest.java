package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.concurrent.ExecutionException;
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

/** Ulysses on P in-JVM workers equals single-device flash attention on the same seeded inputs. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class UlyssesAttentionTest {

    static Stream<Arguments> cases() {
        // P, H, Hkv, layout, causal, window
        return Stream.of(
                Arguments.of(1, 4, 2, SequenceLayout.CONTIGUOUS, true, 0),
                Arguments.of(2, 4, 2, SequenceLayout.CONTIGUOUS, true, 0),
                Arguments.of(2, 4, 2, SequenceLayout.ZIGZAG, false, 0),
                Arguments.of(2, 4, 2, SequenceLayout.STRIPED, true, 5),
                Arguments.of(4, 4, 4, SequenceLayout.CONTIGUOUS, true, 0),
                Arguments.of(4, 8, 4, SequenceLayout.ZIGZAG, true, 0),
                Arguments.of(4, 8, 4, SequenceLayout.STRIPED, false, 9),
                Arguments.of(3, 6, 3, SequenceLayout.CONTIGUOUS, false, 0),
                Arguments.of(6, 12, 6, SequenceLayout.ZIGZAG, true, 0),
                Arguments.of(6, 6, 6, SequenceLayout.CONTIGUOUS, false, 0),
                Arguments.of(8, 8, 8, SequenceLayout.STRIPED, true, 0),
                Arguments.of(8, 16, 8, SequenceLayout.CONTIGUOUS, false, 13),
                Arguments.of(9, 9, 9, SequenceLayout.ZIGZAG, true, 0));
    }

    @ParameterizedTest(name = "P={0} H={1} Hkv={2} {3} causal={4} window={5}")
    @MethodSource("cases")
    void matchesSingleDeviceAttention(int p, int h, int hkv, SequenceLayout layout, boolean causal, int window)
            throws Exception {
        long seed = 31L * p + h + hkv;
        int n = 144;
        INDArray q = randn(seed, DataType.DOUBLE, 2, h, n, 8);
        INDArray k = randn(seed + 1, DataType.DOUBLE, 2, hkv, n, 8);
        INDArray v = randn(seed + 2, DataType.DOUBLE, 2, hkv, n, 8);
        INDArray g = randn(seed + 3, DataType.DOUBLE, 2, h, n, 8);
        double scale = FlashAttention.defaultScale(8);
        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, mask, scale);
        AttentionGradients wholeGrad = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g,
                mask, scale);
        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            UlyssesAttention u = new UlyssesAttention(Communicator.world(t), layout, n, causal, window);
            int r = t.rank();
            UlyssesAttention.Forward f = u.forward(layout.shard(q, r, p), layout.shard(k, r, p),
                    layout.shard(v, r, p), scale);
            AttentionGradients lg = u.backward(layout.shard(q, r, p), layout.shard(k, r, p), layout.shard(v, r, p), f,
                    layout.shard(g, r, p), scale);
            return new INDArray[] {f.local().output(), f.local().lse(), lg.dq(), lg.dk(), lg.dv()};
        });
        String ctx = "P=" + p + " H=" + h + " Hkv=" + hkv + " " + layout + " causal=" + causal + " seed " + seed;
        assertClose("O", layout.unshard(parts[0]), whole.output(), 1e-12, ctx);
        assertClose("LSE", layout.unshard(parts[1]), whole.lse(), 1e-12, ctx);
        assertClose("dQ", layout.unshard(parts[2]), wholeGrad.dq(), 1e-12, ctx);
        assertClose("dK", layout.unshard(parts[3]), wholeGrad.dk(), 1e-12, ctx);
        assertClose("dV", layout.unshard(parts[4]), wholeGrad.dv(), 1e-12, ctx);
    }

    @Test
    void refusesMoreWorkersThanKvHeadsWithAClearMessage() throws Exception {
        INDArray q = randn(1, DataType.DOUBLE, 1, 4, 8, 8);
        INDArray k = randn(2, DataType.DOUBLE, 1, 2, 8, 8);
        try {
            SequenceTesting.onRanks(4, t -> {
                SequenceLayout c = SequenceLayout.CONTIGUOUS;
                new UlyssesAttention(Communicator.world(t), c, 8, true, 0).forward(c.shard(q, t.rank(), 4),
                        c.shard(k, t.rank(), 4), c.shard(k, t.rank(), 4), 0.3);
                return null;
            });
            fail("4 workers over 2 K/V heads must be refused");
        } catch (ExecutionException e) {
            assertTrue(e.getCause() instanceof IllegalArgumentException
                    && e.getCause().getMessage().contains("bounded by the 2 K/V heads"), String.valueOf(e.getCause()));
        }
    }

    /** Runs {@code body} on every in-JVM rank; results by [output][rank]. */
}
