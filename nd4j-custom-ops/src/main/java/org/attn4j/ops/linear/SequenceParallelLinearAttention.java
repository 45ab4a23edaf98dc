package org.attn4j.ops.linear;

import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
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

    /** This algorithm for a batch of packed sequences: the state restarts at every document. */
    @Override
    SequenceParallelLinearAttention<F> withDocuments(Documents documents);

    /**
     * The forward pass with scaled queries, {@code (scale q)} in place of {@code q}.
     *
     * @param scale the query scale; 1 is {@link #forward(INDArray, INDArray, INDArray)}
     */
    @Override
    default F forward(INDArray q, INDArray k, INDArray v, double scale) {
        return forward(scale == 1.0 ? q : q.mul(scale), k, v);
    }

    /** The backward pass of {@link #forward(INDArray, INDArray, INDArray, double)}; dQ includes the scale. */
    @Override
    default AttentionGradients backward(INDArray q, INDArray k, INDArray v, F forward, INDArray dO, double scale) {
        LinearAttentionGradients g = backward(scale == 1.0 ? q : q.mul(scale), k, v, forward, dO);
        return new AttentionGradients(scale == 1.0 ? g.dq() : g.dq().muli(scale), g.dk(), g.dv());
    }

    /** Linear attention's queries are used as they are unless a caller scales them: 1. */
    @Override
    default double defaultScale(long headDim) {
        return 1.0;
    }
}
