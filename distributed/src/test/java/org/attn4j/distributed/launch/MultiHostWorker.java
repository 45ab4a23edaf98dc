package org.attn4j.distributed.launch;

import static org.attn4j.distributed.sequence.SequenceWorker.err;
import static org.attn4j.distributed.sequence.SequenceWorker.randn;
import static org.attn4j.distributed.sequence.SequenceWorker.verdict;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A worker of {@link MultiHostProcessTest}: finds the other ranks through the environment alone (a rendezvous at
 * MASTER_ADDR, or whatever the launcher set), prints its endpoint, runs every sequence-parallel algorithm on seeded
 * float64 inputs (causal; WallFacer with team 2 when 4 divides P), computes the single-device answer from the same
 * seeds, and prints one {@code VERDICT} line per algorithm (and, first, the peers it reaches over IPC); exit code 0 if all are within 1e-12. With
 * {@code ATTN4J_TEST_DELAY_MS} it waits that long before joining.
 */
public final class MultiHostWorker {

    private static final int N = 64;

    private MultiHostWorker() {
    }

    /** Entry point. */
    public static void main(String[] args) throws Exception {
        String delay = System.getenv("ATTN4J_TEST_DELAY_MS");
        if (delay != null) {
            Thread.sleep(Long.parseLong(delay));
        }
        boolean ok = true;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            int p = t.worldSize();
            int r = t.rank();
            System.out.println("ENDPOINT " + r + " " + t.context().endpoints().get(r));
            StringBuilder ipcPeers = new StringBuilder();
            for (int peer = 0; peer < p; peer++) {
                if (t.context().ipcPeer(peer)) {
                    ipcPeers.append(ipcPeers.length() == 0 ? "" : ",").append(peer);
                }
            }
            System.out.println("IPC-PEERS " + r + " [" + ipcPeers + "]");
            StringBuilder tcpPeers = new StringBuilder();
            for (int peer = 0; peer < p; peer++) {
                if (t.context().tcpPeer(peer)) {
                    tcpPeers.append(tcpPeers.length() == 0 ? "" : ",").append(peer);
                }
            }
            System.out.println("TCP-PEERS " + r + " [" + tcpPeers + "]");
            INDArray q = randn(1, 2, 4, N, 8);
            INDArray k = randn(2, 2, 2, N, 8);
            INDArray v = randn(3, 2, 2, N, 8);
            INDArray g = randn(4, 2, 4, N, 8);
            double scale = FlashAttention.defaultScale(8);
            AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, AttentionMask.causal(), scale);
            AttentionGradients wg = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g,
                    AttentionMask.causal(), scale);
            INDArray kFull = randn(2, 2, 4, N, 8);          // Ulysses and LASP: as many key heads as query heads
            INDArray vFull = randn(3, 2, 4, N, 8);
            AttentionOutput wholeMha = FlashAttention.defaults().forward(q, kFull, vFull, AttentionMask.causal(),
                    scale);
            AttentionGradients wgMha = FlashAttention.defaults().backward(q, kFull, vFull, wholeMha.output(),
                    wholeMha.lse(), g, AttentionMask.causal(), scale);
            LinearAttentionOutput lw = LinearAttention.defaults().forward(q, kFull, vFull, Decay.of(0.95), true, null);
            LinearAttentionGradients lwg = LinearAttention.defaults().backward(q, kFull, vFull, Decay.of(0.95), true,
                    null, g, null, lw.cache());
            for (SequenceAlgorithm a : SequenceAlgorithm.all()) {
                boolean mha = a == SequenceAlgorithm.byName("ulysses") || a == SequenceAlgorithm.byName("lasp");
                int team = a == SequenceAlgorithm.byName("wallfacer") && p % 4 == 0 ? 2 : 1;
                SequenceAlgorithm.Settings plain = SequenceAlgorithm.Settings.of(p, N, true).withHeads(4, mha ? 4 : 2);
                SequenceAlgorithm.Settings s = a.name().equals("wallfacer") ? plain.withOption("team", team)
                        : a.softmax() ? plain : plain.withOption("decay", 0.95);
                a.validate(s);
                SequenceLayout l = a.layout(s);
                INDArray kk = mha ? kFull : k;
                INDArray vv = mha ? vFull : v;
                INDArray[] expected = a == SequenceAlgorithm.byName("lasp") ? new INDArray[] {lw.output(), lwg.dq(), lwg.dk(),
                        lwg.dv()} : mha ? new INDArray[] {wholeMha.output(), wgMha.dq(), wgMha.dk(), wgMha.dv()}
                        : new INDArray[] {whole.output(), wg.dq(), wg.dk(), wg.dv()};
                ok &= run(a, a.create(t, s), l, r, p, q, kk, vv, g, a.softmax() ? scale : 1.0, expected);
            }
            Communicator.world(t).barrier();               // nobody closes while another still needs it
        }
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    private static <F extends SequenceParallelAttention.Pass> boolean run(SequenceAlgorithm a,
            SequenceParallelAttention<F> attention, SequenceLayout l, int r, int p, INDArray q, INDArray k,
            INDArray v, INDArray g, double scale, INDArray[] expected) {
        INDArray lq = l.shard(q, r, p);
        INDArray lk = l.shard(k, r, p);
        INDArray lv = l.shard(v, r, p);
        F f = attention.forward(lq, lk, lv, scale);
        AttentionGradients grads = attention.backward(lq, lk, lv, f, l.shard(g, r, p), scale);
        INDArray[] got = {f.output(), grads.dq(), grads.dk(), grads.dv()};
        double[] errors = new double[4];
        for (int i = 0; i < 4; i++) {
            errors[i] = err(got[i], l.shard(expected[i], r, p));
        }
        return verdict(a.name(), errors);
    }
}
