package org.attn4j.ops.linear;

import org.attn4j.ops.SequenceParallelAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The result of a linear attention forward pass.
 *
 * @param output {@code O [B, H, N, D]}
 * @param kvOut  the state after the last position {@code [B, H, D, D]}: {@code kv_N = sum_i lambda^(N-1-i)
 *               k_i v_i^T} plus the decayed incoming state; pass it as {@code kvIn} of the next segment
 * @param cache  the per-chunk states for {@link LinearAttention#backward} (LASP's KV state caching)
 */
public record LinearAttentionOutput(INDArray output, INDArray kvOut, LinearAttentionCache cache)
        implements SequenceParallelAttention.Pass {

    /** Linear attention has no softmax: null. */
    @Override
    public INDArray lse() {
        return null;
    }
}
