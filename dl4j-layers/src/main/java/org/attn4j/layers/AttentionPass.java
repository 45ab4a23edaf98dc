package org.attn4j.layers;

import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * An attention algorithm (on one device or sequence-parallel) together with the forward pass it made, so that a
 * layer's backward pass can hand the pass back to the same algorithm (the type parameter ties them; layers hold it
 * as {@code AttentionPass<?>}).
 *
 * @param <F> what the algorithm's forward pass keeps
 */
final class AttentionPass<F extends SequenceParallelAttention.Pass> {

    private final SequenceParallelAttention<F> algorithm;
    private final F pass;

    private AttentionPass(SequenceParallelAttention<F> algorithm, F pass) {
        this.algorithm = algorithm;
        this.pass = pass;
    }

    /** Runs {@code algorithm}'s forward pass on this worker's shards (the whole sequence on one device). */
    static <F extends SequenceParallelAttention.Pass> AttentionPass<F> forward(SequenceParallelAttention<F> algorithm,
            INDArray q, INDArray k, INDArray v, double scale) {
        return new AttentionPass<>(algorithm, algorithm.forward(q, k, v, scale));
    }

    /** Runs a linear algorithm's forward pass (unscaled queries) on this worker's shards. */
    static <F extends SequenceParallelAttention.Pass> AttentionPass<F> forwardLinear(
            SequenceParallelLinearAttention<F> algorithm, INDArray q, INDArray k, INDArray v) {
        return new AttentionPass<>(algorithm, algorithm.forward(q, k, v));
    }

    /** This worker's output rows {@code [B, H, n, D]}. */
    INDArray output() {
        return pass.output();
    }

    /** The state after the last position of a linear attention pass on one device ({@code kvOut}). */
    INDArray linearState() {
        if (!(pass instanceof LinearAttentionOutput out)) {
            throw new IllegalStateException("not a one-device linear attention pass: " + algorithm);
        }
        return out.kvOut();
    }

    /** This worker's log-sum-exp rows, or null for linear attention. */
    INDArray lse() {
        return pass.lse();
    }

    /** The backward pass of the forward this holds, on the same shards. */
    AttentionGradients backward(INDArray q, INDArray k, INDArray v, INDArray dO, double scale) {
        return algorithm.backward(q, k, v, pass, dO, scale);
    }

    /**
     * The backward pass of a linear forward, with the decay gradient.
     *
     * @throws IllegalStateException if this pass was not made by {@link #forwardLinear}
     */
    LinearAttentionGradients backwardLinear(INDArray q, INDArray k, INDArray v, INDArray dO) {
        if (!(algorithm instanceof SequenceParallelLinearAttention<F> linear)) {
            throw new IllegalStateException("not a linear attention pass: " + algorithm);
        }
        return linear.backward(q, k, v, pass, dO);
    }
}
