package org.attn4j.samples.check;

import java.util.List;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionOutput;

/**
 * An attention algorithm {@code attn4j check} can run on arrays loaded from {@code .npy} files, so its
 * results can be held against a reference computed elsewhere (PyTorch, NumPy).
 *
 * <p>A distributed algorithm shards the problem over its workers itself and gathers the full-size results,
 * so every algorithm answers in the layout of {@link CheckProblem}. One instance serves one check:
 * {@link #forward}, then {@link #backward}, then {@link #bytesSent}.
 */
public interface CheckableAlgorithm {

    /** How many workers (ranks) the algorithm runs on; 1 on one device. */
    int workers();

    /**
     * The forward pass.
     *
     * @return output {@code [B, H, N, D]} and, for softmax algorithms, log-sum-exp {@code [B, H, N]} (natural
     *         log, scale applied; null for linear attention), in the problem's type
     * @throws IllegalArgumentException if the algorithm cannot take this problem (the message says why)
     */
    AttentionOutput forward(CheckProblem problem);

    /**
     * The backward pass, given this algorithm's own forward result.
     *
     * @return dq, dk, dv in the shapes and type of q, k, v
     * @throws IllegalArgumentException if the algorithm cannot take this problem (the message says why)
     */
    AttentionGradients backward(CheckProblem problem, AttentionOutput forward);

    /** Bytes each rank sent, one entry per rank in rank order; zeros on one device. */
    List<RankTraffic> bytesSent();
}
