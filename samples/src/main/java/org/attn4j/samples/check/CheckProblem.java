package org.attn4j.samples.check;

import org.attn4j.ops.flash.AttentionMask;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * One attention problem as {@code attn4j check} loaded it: validated, all arrays of one type (FLOAT or
 * DOUBLE), C order.
 *
 * @param q     queries {@code [B, H, N, D]}
 * @param k     keys {@code [B, Hkv, N, D]}, {@code H % Hkv == 0}
 * @param v     values {@code [B, Hkv, N, D]}
 * @param dO    gradient of the loss with respect to the output {@code [B, H, N, D]}
 * @param mask  the mask, by global position {@code 0..N-1}
 * @param scale the score scale, finite and positive (softmax algorithms)
 * @param decay the decay rate lambda in (0, 1] (linear attention), 1 when not given
 */
public record CheckProblem(INDArray q, INDArray k, INDArray v, INDArray dO, AttentionMask mask, double scale,
                           double decay) {
}
