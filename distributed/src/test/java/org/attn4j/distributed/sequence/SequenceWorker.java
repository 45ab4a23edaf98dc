package org.attn4j.distributed.sequence;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.ops.transforms.Transforms;

/**
 * A worker process for {@link SequenceProcessTest}: runs ring, Ulysses and LASP attention over the Aeron transport
 * on seeded inputs, computes the single-device answer itself from the same seeds, and prints one
 * {@code VERDICT} line per algorithm with the largest relative error of its shard; exit code 0 if all are within
 * 1e-12.
 */
public final class SequenceWorker {

    private static final int N = 64;

    private SequenceWorker() {
    }

    /** Entry point. */
    public static void main(String[] args) throws Exception {
        boolean ok = true;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            Communicator comm = Communicator.world(t);
            int p = t.worldSize();
            int r = t.rank();
            INDArray q = randn(1, 2, 4, N, 8);
            INDArray k = randn(2, 2, 4, N, 8);
            INDArray v = randn(3, 2, 4, N, 8);
            INDArray g = randn(4, 2, 4, N, 8);
            double scale = FlashAttention.defaultScale(8);
            AttentionMask causal = AttentionMask.causal();
            AttentionOutput whole = FlashAttention.defaults().forward(q, k, v, causal, scale);
            AttentionGradients wg = FlashAttention.defaults().backward(q, k, v, whole.output(), whole.lse(), g, causal,
                    scale);

            SequenceLayout zz = SequenceLayout.ZIGZAG;
            RingAttention ring = new RingAttention(comm, zz, N, true, 0);
            RingAttention.Forward ro = ring.forward(zz.shard(q, r, p), zz.shard(k, r, p), zz.shard(v, r, p), scale);
            AttentionGradients rg = ring.backward(zz.shard(q, r, p), zz.shard(k, r, p), zz.shard(v, r, p), ro,
                    zz.shard(g, r, p), scale);
            ok &= verdict("ring", err(ro.output(), zz.shard(whole.output(), r, p)),
                    err(rg.dq(), zz.shard(wg.dq(), r, p)), err(rg.dk(), zz.shard(wg.dk(), r, p)));

            SequenceLayout c = SequenceLayout.CONTIGUOUS;
            UlyssesAttention u = new UlyssesAttention(comm, c, N, true, 0);
            UlyssesAttention.Forward uf = u.forward(c.shard(q, r, p), c.shard(k, r, p), c.shard(v, r, p), scale);
            AttentionGradients ug = u.backward(null, null, null, uf, c.shard(g, r, p), scale);
            ok &= verdict("ulysses", err(uf.local().output(), c.shard(whole.output(), r, p)),
                    err(ug.dq(), c.shard(wg.dq(), r, p)), err(ug.dv(), c.shard(wg.dv(), r, p)));

            Decay decay = Decay.perHead(0.9, 0.95, 0.99, 1.0);
            LinearAttentionOutput lw = LinearAttention.defaults().forward(q, k, v, decay, true, null);
            LinearAttentionGradients lwg = LinearAttention.defaults().backward(q, k, v, decay, true, null, g, null,
                    lw.cache());
            LaspAttention lasp = new LaspAttention(comm, decay, true);
            LaspAttention.Forward lf = lasp.forward(c.shard(q, r, p), c.shard(k, r, p), c.shard(v, r, p));
            LinearAttentionGradients lg = lasp.backward(c.shard(q, r, p), c.shard(k, r, p), c.shard(v, r, p), lf,
                    c.shard(g, r, p));
            ok &= verdict("lasp", err(lf.output(), c.shard(lw.output(), r, p)), err(lg.dq(), c.shard(lwg.dq(), r, p)),
                    err(lg.dk(), c.shard(lwg.dk(), r, p)));
            comm.barrier();                                  // nobody closes while another still needs it
        }
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    /** Prints the VERDICT line of one algorithm (OK if every relative error is within 1e-12). */
    public static boolean verdict(String algo, double... errors) {
        double worst = 0;
        for (double e : errors) {
            worst = Math.max(worst, e);
        }
        boolean ok = worst <= 1e-12;
        System.out.println("VERDICT " + algo + " " + (ok ? "OK" : "FAIL") + " max relative error " + worst);
        return ok;
    }

    /** Largest absolute difference over the largest magnitude of {@code expected}. */
    public static double err(INDArray actual, INDArray expected) {
        double ref = Transforms.abs(expected).maxNumber().doubleValue();
        return Transforms.abs(actual.sub(expected)).maxNumber().doubleValue() / Math.max(ref, 1e-300);
    }

    /** Seeded standard normal values in float64. */
    public static INDArray randn(long seed, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(seed).nextGaussian(shape).castTo(DataType.DOUBLE);
    }
}
