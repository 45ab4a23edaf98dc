package org.attn4j.distributed.plan;

import java.util.Arrays;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The local attention rate of this machine for {@code attn4j plan --measure}: one FlashAttention forward and
 * backward pass on fixed float32 shapes (B 1, H 4, N 1024, D 64, no mask), timed after a warm-up, median of the
 * rounds, expressed in the flops the plan charges for it ({@code (1 + 2.5) 4 B H N^2 D}), so that the plan's
 * compute times reproduce the measured time on this machine.
 *
 * @param tflops  the rate, TFLOP/s
 * @param seconds the median seconds of one forward+backward pass
 * @param shape   the problem timed, e.g. "B 1, H 4, N 1024, D 64, float32, no mask"
 * @param rounds  the rounds timed
 */
public record AttentionRate(double tflops, double seconds, String shape, int rounds) {

    private static final int WARMUP = 1;
    private static final int ROUNDS = 3;

    /** Times the op on this machine (a few seconds on two cores). */
    public static AttentionRate measure() {
        long b = 1;
        long h = 4;
        long n = 1024;
        long d = 64;
        Nd4j.getRandom().setSeed(7);
        INDArray q = Nd4j.rand(DataType.FLOAT, b, h, n, d);
        INDArray k = Nd4j.rand(DataType.FLOAT, b, h, n, d);
        INDArray v = Nd4j.rand(DataType.FLOAT, b, h, n, d);
        INDArray dO = Nd4j.rand(DataType.FLOAT, b, h, n, d);
        FlashAttention flash = FlashAttention.defaults();
        AttentionMask mask = AttentionMask.none();
        double[] seconds = new double[ROUNDS];
        for (int r = -WARMUP; r < ROUNDS; r++) {
            long t0 = System.nanoTime();
            AttentionOutput o = flash.forward(q, k, v, mask);
            AttentionGradients g = flash.backward(q, k, v, o.output(), o.lse(), dO, mask,
                    FlashAttention.defaultScale(d));
            if (g.dq().length() != q.length()) {
                throw new IllegalStateException("AttentionRate: dQ of " + g.dq().length() + " elements");
            }
            if (r >= 0) {
                seconds[r] = (System.nanoTime() - t0) / 1e9;
            }
        }
        Arrays.sort(seconds);
        double median = seconds[ROUNDS / 2];
        double flops = (1 + PlanProblem.BACKWARD_FLOPS_FACTOR) * 4.0 * b * h * n * n * d;
        return new AttentionRate(flops / median / 1e12, median,
                "B " + b + ", H " + h + ", N " + n + ", D " + d + ", float32, no mask", ROUNDS);
    }
}
