package org.attn4j.ops;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * One worker's part of a sequence-parallel attention algorithm: it takes this worker's shards of q, k, v (and for
 * the backward pass of dO) and returns this worker's shards of the output and of dQ, dK, dV, equal to the rows of
 * single-device attention that the worker holds. What the shards are (contiguous, zigzag, striped) is fixed when
 * the algorithm is built; every member of the group calls the same methods in the same order.
 *
 * <p>The implementations live in the distributed module ({@code org.attn4j.distributed.sequence}):
 * {@code RingAttention}, {@code WallFacerAttention}, {@code Attention2D}, {@code Attention2DOverlap},
 * {@code LaspAttention} (linear attention), {@code UlyssesAttention} and {@code AllGatherAttention}; the
 * single-device case ({@code P = 1}) is {@link org.attn4j.ops.flash.LocalAttention} and
 * {@link org.attn4j.ops.linear.LocalLinearAttention}. The attention layers and SameDiff's sequence-parallel op
 * call only this interface, so they need neither a transport nor a branch for one device.
 *
 * @param <F> what the forward pass keeps for the backward pass
 */
public interface SequenceParallelAttention<F extends SequenceParallelAttention.Pass> {

    /** What a forward pass returns: this worker's rows of the result, and whatever its backward pass needs. */
    interface Pass {
        /** This worker's rows of the output, {@code [B, H, N/P, D]}. */
        INDArray output();

        /** This worker's rows of the softmax log-sum-exp {@code [B, H, N/P]}, or null for linear attention. */
        INDArray lse();
    }

    /** A softmax pass that keeps this worker's rows as an {@link AttentionOutput}, from which it answers. */
    interface SoftmaxPass extends Pass {
        /** This worker's rows of the output and log-sum-exp. */
        AttentionOutput local();

        @Override
        default INDArray output() {
            return local().output();
        }

        @Override
        default INDArray lse() {
            return local().lse();
        }
    }

    /**
     * The forward pass on this worker's shards.
     *
     * @param q     local queries {@code [B, H, N/P, D]}
     * @param k     local keys {@code [B, Hkv, N/P, D]}
     * @param v     local values {@code [B, Hkv, N/P, D]}
     * @param scale score scale (softmax attention: usually {@code 1/sqrt(D)}; linear attention: the queries are
     *              multiplied by it, 1 for the plain op)
     * @return this worker's rows of the result and what its backward pass needs
     */
    F forward(INDArray q, INDArray k, INDArray v, double scale);

    /**
     * The backward pass on this worker's shards, given its forward pass on the same shards.
     *
     * @param q       the local queries given to {@link #forward}
     * @param k       the local keys given to {@link #forward}
     * @param v       the local values given to {@link #forward}
     * @param forward what {@link #forward} returned
     * @param dO      gradient with respect to this worker's output rows
     * @param scale   the scale given to {@link #forward}
     * @return this worker's dQ, dK, dV
     */
    AttentionGradients backward(INDArray q, INDArray k, INDArray v, F forward, INDArray dO, double scale);

    /**
     * This algorithm for a batch of packed sequences: attention stays within each document
     * ({@link Documents}, ids by global position; every member of the group passes the same table). The returned
     * instance serves the forward and backward passes of that batch; this one is unchanged.
     *
     * @param documents the batch's document ids {@code [B, N]} by global position, or null for one document each
     * @throws IllegalArgumentException if the table does not cover the algorithm's sequence length
     */
    SequenceParallelAttention<F> withDocuments(Documents documents);

    /**
     * The scale for a caller that set none ({@code scale} in {@link #forward}): {@code 1/sqrt(D)} for softmax
     * attention ({@link FlashAttention#defaultScale}).
     *
     * @param headDim the head dimension D
     */
    default double defaultScale(long headDim) {
        return FlashAttention.defaultScale(headDim);
    }
}
