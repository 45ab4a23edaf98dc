package org.attn4j.ops.linear;

import org.attn4j.ops.SequenceParallelAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A sequence-parallel linear attention (LASP): a {@link SequenceParallelAttention} whose backward pass can also
 * give the gradient of the decay rates, which a layer that learns its decay needs.
 *
 * @param <F> what the forward pass keeps for the backward pass
 */
public interface SequenceParallelLinearAttention<F extends SequenceParallelAttention.Pass>
        extends SequenceParallelAttention<F> {

    /**
     * The forward pass on this worker's shards with unscaled queries.
     *
     * @param q local queries {@code [B, H, N/P, D]}
     * @param k local keys {@code [B, Hkv, N/P, D]}
     * @param v local values {@code [B, Hkv, N/P, D]}
     * @return this worker's output rows and what its backward pass needs
     */
    F forward(INDArray q, INDArray k, INDArray v);

    /**
     * The backward pass of {@link #forward(INDArray, INDArray, INDArray)}.
     *
     * @return this worker's dQ, dK, dV and its rows' share of the decay gradient (summed over the workers, the
     *         decay gradient of the whole sequence)
     */
    LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, F forward, INDArray dO);
}
