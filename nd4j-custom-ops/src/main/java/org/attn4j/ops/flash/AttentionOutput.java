package org.attn4j.ops.flash;

import org.attn4j.ops.SequenceParallelAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A (partial) attention result: {@code output} {@code [B, H, Nq, D]}, normalised, and {@code lse}
 * {@code [B, H, Nq]}, the natural log of {@code sum_j exp(scale * q.k_j)} over the keys the query saw
 * (negative infinity, with a zero output row, where it saw none). Two partial results over disjoint key
 * sets combine with {@link AttentionMerge#merge}.
 *
 * @param output normalised attention output {@code [B, H, Nq, D]}
 * @param lse    log-sum-exp of the scaled scores {@code [B, H, Nq]}
 */
public record AttentionOutput(INDArray output, INDArray lse) implements SequenceParallelAttention.Pass {
}
