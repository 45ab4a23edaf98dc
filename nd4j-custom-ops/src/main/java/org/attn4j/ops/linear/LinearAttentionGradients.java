package org.attn4j.ops.linear;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Gradients of a linear attention call.
 *
 * @param dq   {@code [B, H, N, D]}
 * @param dk   {@code [B, Hkv, N, D]}
 * @param dv   {@code [B, Hkv, N, D]}
 * @param dKvIn gradient with respect to the incoming state {@code kvIn} {@code [B, H, D, D]}: what a
 *              sequence-parallel worker sends back to the worker before it (LASP algorithm 3, dKV)
 * @param dDecay dL/dlambda per query head {@code [H]}, summed over the batch (sum it over heads for a shared
 *               lambda); null unless asked for with {@link LinearAttention#withDecayGradient()}
 */
public record LinearAttentionGradients(INDArray dq, INDArray dk, INDArray dv, INDArray dKvIn, INDArray dDecay) {
}
