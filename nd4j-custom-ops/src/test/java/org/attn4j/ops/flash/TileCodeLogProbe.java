package org.attn4j.ops.flash;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The child JVM of {@link TileCodeLogTest}: flash calls in phases, each phase two forward calls and one backward call
 * (float32, causal, seeded) with one system property set or none. Arguments: one per phase, {@code -} for none or
 * {@code key=value}. Prints {@code calls done} on stdout at the end; the log goes to stderr.
 */
final class TileCodeLogProbe {

    private TileCodeLogProbe() {
    }

    public static void main(String[] args) {
        INDArray q = Arrays4.randn(1, DataType.FLOAT, 1, 2, 64, 16);
        INDArray k = Arrays4.randn(2, DataType.FLOAT, 1, 2, 64, 16);
        INDArray v = Arrays4.randn(3, DataType.FLOAT, 1, 2, 64, 16);
        double scale = FlashAttention.defaultScale(16);
        for (String phase : args) {
            String[] kv = phase.split("=", 2);
            if (kv.length == 2) {
                System.setProperty(kv[0], kv[1]);
            }
            FlashAttention op = FlashAttention.defaults();
            op.forward(q, k, v, AttentionMask.causal(), scale);
            AttentionOutput out = op.forward(q, k, v, AttentionMask.causal(), scale);
            op.backward(q, k, v, out.output(), out.lse(), out.output(), AttentionMask.causal(), scale);
            if (kv.length == 2) {
                System.clearProperty(kv[0]);
            }
        }
        System.out.println("calls done");
    }
}
