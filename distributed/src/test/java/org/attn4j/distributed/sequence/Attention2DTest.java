package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
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
import org.nd4j.linalg.factory.Nd4j;

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
        INDArray q = randn(seed, 2, 4, n, 8);
        INDArray k = randn(seed + 1, 2, 2, n, 8);
        INDArray v = randn(seed + 2, 2, 2, n, 8);
        INDArray g = randn(seed + 3, 2, 4, n, 8);
        double scale = FlashAttention.defaultScale(8);
        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, mask, scale);
        AttentionGradients wg = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g, mask,
                scale);
        SequenceLayout cyclic = SequenceLayout.STRIPED;
        List<InJvmTransport> transports = InJvmTransport.group(p, Duration.ofSeconds(20));
        ExecutorService pool = Executors.newFixedThreadPool(p);
        try {
            List<Future<INDArray[]>> futures = new ArrayList<>();
            for (Transport t : transports) {
                futures.add(pool.submit(() -> {
                    Attention2D a2d = new Attention2D(t, n, causal, window);
                    int r = t.rank();
                    INDArray lq = cyclic.shard(q, r, p);
                    Attention2D.Forward f = a2d.forward(lq, cyclic.shard(k, r, p), cyclic.shard(v, r, p), scale);
                    AttentionGradients lg = a2d.backward(lq, f, cyclic.shard(g, r, p), scale);
                    return new INDArray[] {f.local().output(), f.local().lse(), lg.dq(), lg.dk(), lg.dv()};
                }));
            }
            INDArray[][] parts = new INDArray[5][p];
            for (int r = 0; r < p; r++) {
                INDArray[] res = futures.get(r).get(60, TimeUnit.SECONDS);
                for (int i = 0; i < 5; i++) {
                    parts[i][r] = res[i];
                }
            }
            String ctx = "P=" + p + " causal=" + causal + " window=" + window + " seed " + seed;
            assertClose("O", cyclic.unshard(parts[0]), whole.output(), ctx);
            assertClose("LSE", cyclic.unshard(parts[1]), whole.lse(), ctx);
            assertClose("dQ", cyclic.unshard(parts[2]), wg.dq(), ctx);
            assertClose("dK", cyclic.unshard(parts[3]), wg.dk(), ctx);
            assertClose("dV", cyclic.unshard(parts[4]), wg.dv(), ctx);
        } finally {
            pool.shutdownNow();
            transports.forEach(Transport::close);
        }
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

    private static INDArray randn(long seed, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(seed).nextGaussian(shape).castTo(DataType.DOUBLE);
    }

    private static void assertClose(String what, INDArray actual, INDArray expected, String ctx) {
        double[] a = actual.dup('c').data().asDouble();
        double[] e = expected.dup('c').data().asDouble();
        double diff = 0;
        double ref = 0;
        for (int i = 0; i < e.length; i++) {
            if (Double.isInfinite(e[i]) && a[i] == e[i]) {
                continue;
            }
            diff = Math.max(diff, Math.abs(a[i] - e[i]));
            ref = Math.max(ref, Math.abs(e[i]));
        }
        double err = ref == 0 ? diff : diff / ref;
        if (!(err <= 1e-12) || a.length != e.length) {
            fail(what + ": relative error " + err + " > 1e-12 (" + ctx + ")");
        }
    }
}
