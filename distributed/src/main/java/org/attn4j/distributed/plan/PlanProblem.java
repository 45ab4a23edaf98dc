package org.attn4j.distributed.plan;

/**
 * What a plan predicts for: a cluster, the attention layers, the sequence length N and the rate of the local
 * attention kernel. Sizes are bytes per rank and per layer; {@link #layers()} scales them at the end.
 *
 * @param cluster the machines
 * @param model   the attention layers
 * @param length  sequence length N, a multiple of P
 * @param causal  causal mask (half the score tiles are computed)
 * @param linear  linear attention (LASP) instead of softmax attention
 * @param tflops  rate of the local attention kernel, TFLOP/s (10^12 flop per second), forward and backward
 */
public record PlanProblem(ClusterSpec cluster, ModelSpec model, long length, boolean causal, boolean linear,
                          double tflops) {

    /**
     * Backward flops over forward flops of the local kernel: the backward pass recomputes the scores
     * ({@code QK^T}) and forms {@code dV}, {@code dP}, {@code dQ} and {@code dK}, five products against the
     * forward's two; FlashAttention-2 style kernels reach a lower rate in backward, so 2.5 is the usual estimate.
     */
    public static final double BACKWARD_FLOPS_FACTOR = 2.5;

    /** @throws IllegalArgumentException if N is not a positive multiple of P or the rate is not positive */
    public PlanProblem {
        int p = cluster.workers();
        if (length < 1) {
            throw new IllegalArgumentException("--seq-len must be >= 1, got " + length);
        }
        if (length % p != 0) {
            throw new IllegalArgumentException("--seq-len " + length + " is not a multiple of P = " + p
                    + " (every worker holds N/P positions)");
        }
        ClusterSpec.positive("--rate", tflops, "TFLOP/s");
    }

    /** Workers P. */
    public int workers() {
        return cluster.workers();
    }

    /** Positions per worker, N/P. */
    public long shard() {
        return length / workers();
    }

    /** {@code X_q = B H (N/P) D w}: one worker's q (or O, dO, dQ) shard in bytes. */
    public long xq() {
        return (long) model.batch() * model.heads() * shard() * model.headDim() * model.bytesPerElement();
    }

    /** {@code X_kv = B Hkv (N/P) D w}: one worker's K (or V, dK, dV) shard in bytes. */
    public long xkv() {
        return (long) model.batch() * model.kvHeads() * shard() * model.headDim() * model.bytesPerElement();
    }

    /** {@code X_lse = B H (N/P) w}: one worker's LSE shard in bytes. */
    public long xlse() {
        return (long) model.batch() * model.heads() * shard() * model.bytesPerElement();
    }

    /** {@code B H D^2 w}: the linear-attention state of all query heads (LASP, table 1: {@code B d^2 / h}). */
    public long state() {
        return (long) model.batch() * model.heads() * model.headDim() * model.headDim() * model.bytesPerElement();
    }

    /**
     * Forward flops of one worker's share of one layer, perfectly balanced. Softmax attention:
     * {@code 4 B H N^2 D / P} ({@code QK^T} and {@code PV}, 2 flops per multiply-add), half when causal.
     * Linear attention on a chunk of {@code n = N/P}: the masked intra-chunk products, {@code 2 B H n^2 D} when
     * causal, and the state products {@code Q KV} and {@code K^T V}, {@code 4 B H n D^2}.
     */
    public double forwardFlopsPerWorker() {
        double b = model.batch();
        double h = model.heads();
        double d = model.headDim();
        if (linear) {
            double n = shard();
            return b * h * ((causal ? 2 * n * n * d : 0) + 4 * n * d * d);
        }
        double n = length;
        return 4 * b * h * n * n * d / workers() * (causal ? 0.5 : 1.0);
    }

    /** Seconds of one worker's forward compute for one layer at {@link #tflops()}. */
    public double forwardSeconds() {
        return forwardFlopsPerWorker() / (tflops * 1e12);
    }

    /** Seconds of one worker's backward compute for one layer. */
    public double backwardSeconds() {
        return BACKWARD_FLOPS_FACTOR * forwardSeconds();
    }

    /** Layers the per-layer numbers are multiplied by. */
    public int layers() {
        return model.layers();
    }
}
