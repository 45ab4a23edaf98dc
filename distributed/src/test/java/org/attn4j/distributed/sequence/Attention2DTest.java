package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
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

/** ATTENTION2D-NO on a g x g grid of in-JVM workers equals single-device flash attention. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class Attention2DTest {

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (int p : new int[] {1, 4, 9}) {
            a.add(Arguments.of(p, true, 0));
            a.add(Arguments.of(p, false, 0));
            a.add(Arguments.of(p, true, 13));
        }
        return a.stream();
    }

    @ParameterizedTest(name = "P={0} causal={1} window={2}")
    @MethodSource("cases")
    void matchesSingleDeviceAttention(int p, boolean causal, int window) throws Exception {
        int n = 72;
        long seed = 7L * p + (causal ? 1 : 0) + window;
        INDArray q = randn(seed, DataType.DOUBLE, 2, 4, n, 8);
        INDArray k = randn(seed + 1, DataType.DOUBLE, 2, 2, n, 8);
        INDArray v = randn(seed + 2, DataType.DOUBLE, 2, 2, n, 8);
        INDArray g = randn(seed + 3, DataType.DOUBLE, 2, 4, n, 8);
        double scale = FlashAttention.defaultScale(8);
        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, mask, scale);
        AttentionGradients wg = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g, mask,
                scale);
        SequenceLayout cyclic = SequenceLayout.STRIPED;
        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            Attention2D a2d = new Attention2D(t, n, causal, window);
            int r = t.rank();
            INDArray lq = cyclic.shard(q, r, p);
            Attention2D.Forward f = a2d.forward(lq, cyclic.shard(k, r, p), cyclic.shard(v, r, p), scale);
            AttentionGradients lg = a2d.backward(lq, cyclic.shard(k, r, p), cyclic.shard(v, r, p), f, cyclic.shard(g, r, p), scale);
            return new INDArray[] {f.local().output(), f.local().lse(), lg.dq(), lg.dk(), lg.dv()};
        });
        String ctx = "P=" + p + " causal=" + causal + " window=" + window + " seed " + seed;
        assertClose("O", cyclic.unshard(parts[0]), whole.output(), 1e-12, ctx);
        assertClose("LSE", cyclic.unshard(parts[1]), whole.lse(), 1e-12, ctx);
        assertClose("dQ", cyclic.unshard(parts[2]), wg.dq(), 1e-12, ctx);
        assertClose("dK", cyclic.unshard(parts[3]), wg.dk(), 1e-12, ctx);
        assertClose("dV", cyclic.unshard(parts[4]), wg.dv(), 1e-12, ctx);
    }

    @Test
    void refusesAWorldSizeThatIsNotASquare() {
        List<InJvmTransport> transports = InJvmTransport.group(3, Duration.ofSeconds(5));
        try {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new Attention2D(transports.get(0), 36, true, 0));
            assertTrue(e.getMessage().contains("3 workers; the square grid needs a square number"), e.getMessage());
        } finally {
            transports.forEach(Transport::close);
        }
    }
}
