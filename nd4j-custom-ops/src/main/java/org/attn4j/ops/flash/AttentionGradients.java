package org.attn4j.ops.flash;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Gradients of an attention call with respect to its inputs, in the inputs' shapes and type.
 *
 * @param dq gradient of q {@code [B, H, Nq, D]}
 * @param dk gradient of k {@code [B, Hkv, Nk, D]}
 * @param dv gradient of v {@code [B, Hkv, Nk, D]}
 */
public record AttentionGradients(INDArray dq, INDArray dk, INDArray dv) {
}
