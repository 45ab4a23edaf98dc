package org.attn4j.samples.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.sequence.Attention2D;
import org.attn4j.distributed.sequence.LaspAttention;
import org.attn4j.distributed.sequence.RingAttention;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.sequence.UlyssesAttention;
import org.attn4j.distributed.sequence.WallFacerAttention;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.samples.plan.CommunicationFormulas.Volume;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * attn4j's algorithms, run in one JVM, send per rank exactly the bytes of {@link CommunicationFormulas} (the
 * transport's counters), so the plan prices what attn4j sends. B 1, H 4, Hkv 2, N/P 4, D 4, float64.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PlanFormulasMatchImplementationTest {

    private static final int B = 1;
    private static final int H = 4;
    private static final int HKV = 2;
    private static final int SHARD = 4;
    private static final int D = 4;
    private static final long W = Double.BYTES;
    private static final long XQ = (long) B * H * SHARD * D * W;
    private static final long XKV = (long) B * HKV * SHARD * D * W;
    private static final long XLSE = (long) B * H * SHARD * W;

    @Test
    void ringSendsTheFormula() throws Exception {
        long[][] sent = run(4, t -> new RingAttention(Communicator.world(t), SequenceLayout.ZIGZAG, 4 * SHARD, true,
                0));
        for (long[] s : sent) {
            assertEquals(CommunicationFormulas.ring(4, XKV), new Volume(s[0], s[1]));
        }
    }

    @Test
    void ulyssesSendsTheFormula() throws Exception {
        long[][] sent = run(2, t -> new UlyssesAttention(Communicator.world(t), SequenceLayout.CONTIGUOUS,
                2 * SHARD, true, 0));
        for (long[] s : sent) {
            assertEquals(CommunicationFormulas.ulysses(2, XQ, XKV, XLSE), new Volume(s[0], s[1]));
        }
    }

    @Test
    void attention2dSendsTheFormulaOnTheTwoByTwoGrid() throws Exception {
        long[][] sent = run(4, t -> new Attention2D(t, 4 * SHARD, true, 0));
        for (int w = 0; w < 4; w++) {
            Volume expected = CommunicationFormulas.attention2d(2, 2, w % 2 != w / 2, XQ, XKV, XLSE);
            assertEquals(expected, new Volume(sent[w][0], sent[w][1]), "rank " + w);
        }
    }

    @Test
    void wallFacerSendsTheFormulaForTeamsOfTwo() throws Exception {
        for (int p : new int[] {4, 8}) {
            long[][] sent = run(p, t -> new WallFacerAttention(t, 2, SequenceLayout.ZIGZAG, p * SHARD, true, 0));
            for (int r = 0; r < p; r++) {
                Volume expected = CommunicationFormulas.wallFacer(p, 2, r % 2, XQ, XKV, XLSE);
                assertEquals(expected, new Volume(sent[r][0], sent[r][1]), "P = " + p + ", rank " + r);
            }
        }
    }

    @Test
    void laspSendsOneStateAlongTheChain() throws Exception {
        long[][] sent = run(4, t -> new LaspAttention(Communicator.world(t), Decay.of(0.9), true));
        long state = (long) B * H * D * D * W;
        for (int r = 0; r < 4; r++) {
            assertEquals(CommunicationFormulas.laspCausal(4, r, state), new Volume(sent[r][0], sent[r][1]),
                    "rank " + r);
        }
    }

    interface Factory {
        SequenceParallelAttention<?> create(Transport t);
    }

    /** Runs forward and backward on every rank; returns {forward, backward} bytes per rank. */
    private static long[][] run(int p, Factory factory) throws Exception {
        List<InJvmTransport> transports = InJvmTransport.group(p, Duration.ofSeconds(30));
        ExecutorService pool = Executors.newFixedThreadPool(p);
        try {
            List<Future<long[]>> futures = new ArrayList<>();
            for (Transport t : transports) {
                futures.add(pool.submit(() -> passes(t, factory.create(t))));
            }
            long[][] out = new long[p][];
            for (int r = 0; r < p; r++) {
                out[r] = futures.get(r).get(60, TimeUnit.SECONDS);
            }
            return out;
        } finally {
            pool.shutdownNow();
            transports.forEach(Transport::close);
        }
    }

    private static <F extends SequenceParallelAttention.Pass> long[] passes(Transport t,
                                                                         SequenceParallelAttention<F> a) {
        INDArray q = Nd4j.rand(DataType.DOUBLE, B, H, SHARD, D);
        INDArray k = Nd4j.rand(DataType.DOUBLE, B, HKV, SHARD, D);
        INDArray v = Nd4j.rand(DataType.DOUBLE, B, HKV, SHARD, D);
        long start = t.traffic().total();
        F f = a.forward(q, k, v, 0.5);
        long forward = t.traffic().total() - start;
        a.backward(q, k, v, f, q, 0.5);
        return new long[] {forward, t.traffic().total() - start - forward};
    }
}
