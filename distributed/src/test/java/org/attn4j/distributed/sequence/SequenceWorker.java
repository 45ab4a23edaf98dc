package org.attn4j.distributed.sequence;

import org.attn4j.distributed.collective.Communicator;
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
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.ops.transforms.Transforms;

/**
 * A worker process for {@link SequenceProcessTest}: the conformance contract of SequenceAlgorithmConformanceTest
 * over the Aeron transport. For every listed algorithm ({@link SequenceAlgorithm#all()}) whose settings accept this
 * P, causal and full, float64 with grouped K/V heads, it runs its shard, computes the single-device answer itself
 * from the same seeds, and prints one {@code VERDICT name/mask OK|FAIL} line with the largest relative error of its
 * O, LSE, dQ, dK, dV and whether the bytes its transport sent in each pass equal the descriptor's formula; exit code
 * 0 if every verdict is OK.
 */
public final class SequenceWorker {

    private static final int N = 48;
    private static final int H = 12;
    private static final int HKV = 6;
    private static final int D = 4;

    private SequenceWorker() {
    }

    /** Entry point. */
    public static void main(String[] args) throws Exception {
        boolean ok = true;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            int p = t.worldSize();
            int r = t.rank();
            INDArray q = randn(1, 1, H, N, D);
            INDArray k = randn(2, 1, HKV, N, D);
            INDArray v = randn(3, 1, HKV, N, D);
            INDArray g = randn(4, 1, H, N, D);
            for (SequenceAlgorithm a : SequenceAlgorithm.all()) {
                for (boolean causal : new boolean[] {true, false}) {
                    SequenceAlgorithm.Settings plain = SequenceAlgorithm.Settings.of(p, N, causal).withHeads(H, HKV);
                    SequenceAlgorithm.Settings s = a.softmax() || !causal ? plain : plain.withOption("decay", 0.9);
                    try {
                        a.validate(s);
                    } catch (IllegalArgumentException e) {
                        continue;                            // every rank skips the same configurations
                    }
                    ok &= check(t, a, s, q, k, v, g, r, p);
                }
            }
            Communicator.world(t).barrier();                 // nobody closes while another still needs it
        }
        System.out.flush();
        System.exit(ok ? 0 : 1);
    }

    private static boolean check(AeronTransport t, SequenceAlgorithm a, SequenceAlgorithm.Settings s, INDArray q,
                                 INDArray k, INDArray v, INDArray g, int r, int p) {
        SequenceLayout l = a.layout(s);
        double scale = a.softmax() ? 0.4 : 1.0;
        INDArray[] expected;
        if (a.softmax()) {
            AttentionMask mask = AttentionMask.builder().causal(s.causal()).build();
            AttentionOutput o = FlashAttention.defaults().forward(q, k, v, mask, scale);
            AttentionGradients w = FlashAttention.defaults().backward(q, k, v, o.output(), o.lse(), g, mask, scale);
            expected = new INDArray[] {o.output(), o.lse(), w.dq(), w.dk(), w.dv()};
        } else {
            Decay decay = s.causal() ? Decay.of(a.option(s, "decay")) : Decay.none();
            LinearAttentionOutput o = LinearAttention.defaults().forward(q, k, v, decay, s.causal(), null);
            LinearAttentionGradients w = LinearAttention.defaults().backward(q, k, v, decay, s.causal(), null, g,
                    null, o.cache());
            expected = new INDArray[] {o.output(), null, w.dq(), w.dk(), w.dv()};
        }
        INDArray[] got = run(a.create(t, s), l.shard(q, r, p), l.shard(k, r, p), l.shard(v, r, p),
                l.shard(g, r, p), scale, t);
        SequenceAlgorithm.Volume formula = a.volume(s, SequenceAlgorithm.ShardBytes.of(1, H, HKV, N / p, D,
                Double.BYTES), r);
        long[] sent = got[5].toLongVector();
        String name = a.name() + "/" + (s.causal() ? "causal" : "full");
        System.out.println("BYTES " + name + " rank " + r + " sent " + sent[0] + " / " + sent[1] + ", formula "
                + formula.forward() + " / " + formula.backward());
        double[] errors = new double[6];
        for (int i = 0; i < 5; i++) {
            if (expected[i] != null) {
                // The LSE [B, H, N] is sharded as [B, H, N, 1].
                INDArray e = expected[i].rank() == 3 ? expected[i].reshape(1, H, N, 1) : expected[i];
                errors[i] = err(got[i].reshape(l.shard(e, r, p).shape()), l.shard(e, r, p));
            }
        }
        // Bytes other than the formula's fail the verdict.
        errors[5] = formula.equals(new SequenceAlgorithm.Volume(sent[0], sent[1])) ? 0 : Double.POSITIVE_INFINITY;
        return verdict(name, errors);
    }

    /** O, LSE (null for linear attention), dQ, dK, dV, and the bytes sent forward and backward. */
    private static <F extends SequenceParallelAttention.Pass> INDArray[] run(SequenceParallelAttention<F> a,
                                                                             INDArray q, INDArray k, INDArray v,
                                                                             INDArray dO, double scale,
                                                                             AeronTransport t) {
        Communicator.world(t).barrier();                     // the counters see only this algorithm's bytes
        long b0 = t.traffic().total();
        F f = a.forward(q, k, v, scale);
        long b1 = t.traffic().total();
        AttentionGradients gr = a.backward(q, k, v, f, dO, scale);
        long b2 = t.traffic().total();
        return new INDArray[] {f.output(), f.lse(), gr.dq(), gr.dk(), gr.dv(), Nd4j.createFromArray(b1 - b0, b2 - b1)};
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
