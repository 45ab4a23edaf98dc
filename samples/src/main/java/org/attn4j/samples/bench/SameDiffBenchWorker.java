package org.attn4j.samples.bench;

import java.util.Arrays;
import java.util.Collections;
import java.util.Locale;
import java.util.Map;

import org.attn4j.ops.samediff.SDAttention;
import org.attn4j.samples.metrics.PeakMemory;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One configuration of {@code attn4j bench samediff} in its own process, so that the process's peak resident size
 * is this configuration's alone: args {@code KIND N D REPEATS}, KIND one of {@code flash} ({@link SDAttention#flash},
 * causal), {@code linear} ({@link SDAttention#linear}, causal, decay 0.99) or {@code stock} (SameDiff's own
 * {@code sd.nn.dotProductAttention}, causal through an additive mask built in the graph). One head, float32; the
 * graph's q, k, v are variables and each repeat is one {@code calculateGradients} (forward and backward). Prints
 * {@code RESULT kind,n,d,median_ms,baseline_bytes,peak_bytes,loss} or {@code FAILED kind,n,reason} and exits 1.
 */
public final class SameDiffBenchWorker {

    static final String RESULT = "RESULT ";
    static final String FAILED = "FAILED ";

    private SameDiffBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        String kind = args[0];
        int n = Integer.parseInt(args[1]);
        int d = Integer.parseInt(args[2]);
        int repeats = Integer.parseInt(args[3]);
        try {
            Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
            Nd4j.getRandom().setSeed(1);
            SameDiff sd = SameDiff.create();
            SDVariable q = sd.var("q", Nd4j.randn(DataType.FLOAT, 1, 1, n, d));
            SDVariable k = sd.var("k", Nd4j.randn(DataType.FLOAT, 1, 1, n, d));
            SDVariable v = sd.var("v", Nd4j.randn(DataType.FLOAT, 1, 1, n, d));
            SDVariable out = switch (kind) {
                case "flash" -> SDAttention.flash(q, k, v).causal(true).build("o");
                case "linear" -> SDAttention.linear(q, k, v).causal(true)
                        .decay(org.attn4j.ops.linear.Decay.of(0.99)).build("o");
                case "stock" -> stock(sd, q, k, v, n, d);
                default -> throw new IllegalArgumentException("unknown kind " + kind);
            };
            SDVariable g = sd.constant("g", Nd4j.randn(DataType.FLOAT, 1, 1, n, d).muli(1.0 / n));
            SDVariable loss = out.mul(g).sum().rename("loss");
            loss.markAsLoss();
            PeakMemory.collectGarbage();
            PeakMemory memory = PeakMemory.start();
            double[] ms = new double[repeats];
            double lossValue = Double.NaN;
            for (int i = 0; i < repeats; i++) {
                long t0 = System.nanoTime();
                Map<String, INDArray> grads = sd.calculateGradients(Collections.emptyMap(), "q", "k", "v");
                ms[i] = (System.nanoTime() - t0) / 1e6;
                if (!Double.isFinite(grads.get("q").sumNumber().doubleValue())) {
                    throw new IllegalStateException("dQ is not finite");
                }
                if (i == 0) {
                    lossValue = sd.output(Collections.emptyMap(), "loss").get("loss").getDouble(0);
                }
            }
            PeakMemory.Reading peak = memory.stop();
            Arrays.sort(ms);
            System.out.printf(Locale.ROOT, "%s%s,%d,%d,%.1f,%d,%d,%.6g%n", RESULT, kind, n, d, ms[repeats / 2],
                    peak.baselineBytes(), peak.peakBytes(), lossValue);
        } catch (Throwable e) {
            System.out.println(FAILED + kind + "," + n + "," + e.getClass().getSimpleName() + ": "
                    + String.valueOf(e.getMessage()).lines().findFirst().orElse(""));
            System.out.flush();
            System.exit(1);
        }
    }

    /** SameDiff's stock scaled dot-product attention, causal by a {@code [N, N]} additive mask: N x N arrays. */
    private static SDVariable stock(SameDiff sd, SDVariable q, SDVariable k, SDVariable v, int n, int d) {
        // dotProductAttention takes [B, D, N]; its mask hides keys per batch only, so causality is built by hand:
        // softmax(Q K^T / sqrt(d) + M) V with M = -1e9 above the diagonal.
        SDVariable q2 = q.reshape(n, d);
        SDVariable k2 = k.reshape(n, d);
        SDVariable v2 = v.reshape(n, d);
        float[] m = new float[n * n];
        for (int i = 0; i < n; i++) {
            Arrays.fill(m, i * n + i + 1, (i + 1) * n, -1e9f);
        }
        INDArray mask = Nd4j.create(m, new long[] {n, n}, DataType.FLOAT);
        SDVariable scores = sd.mmul(q2, k2, false, true, false).mul(1.0 / Math.sqrt(d))
                .add(sd.constant("causal", mask));
        return sd.nn.softmax(scores, 1).mmul(v2).reshape(1, 1, n, d).rename("o");
    }
}
