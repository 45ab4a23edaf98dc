package org.attn4j.ops.linear;

import org.attn4j.ops.Documents;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Linear attention on one device, behind the same interface as LASP: the case {@code P = 1}, where this worker's
 * shard is the whole sequence and no state comes in (unless {@link #withIncomingState} gives one). The forward keeps the op's per-chunk states for
 * the backward pass (LASP's KV state caching, section 2.3).
 */
public final class LocalLinearAttention implements SequenceParallelLinearAttention<LinearAttentionOutput> {

    private final LinearAttention op;
    private final Decay decay;
    private final boolean causal;
    private final Documents documents;
    private final INDArray kvIn;

    /**
     * @param op     the local op (its chunk size; {@link LinearAttention#withDecayGradient()} for a learned decay)
     * @param decay  the decay rates (must be {@link Decay#none()} when not causal)
     * @param causal causal linear attention or the non-causal right product
     */
    public LocalLinearAttention(LinearAttention op, Decay decay, boolean causal) {
        this(op, decay, causal, null, null);
    }

    private LocalLinearAttention(LinearAttention op, Decay decay, boolean causal, Documents documents,
                                 INDArray kvIn) {
        if (op == null || decay == null) {
            throw new IllegalArgumentException("LocalLinearAttention: op and decay must not be null, got " + op
                    + ", " + decay);
        }
        this.op = op;
        this.decay = decay;
        this.causal = causal;
        this.documents = documents;
        this.kvIn = kvIn;
    }

    /**
     * This attention continuing from {@code kvIn} ({@code [B, H, D, D]}, the {@code kvOut} of the positions before;
     * null = from zero): incremental decoding, one call per new step or group of steps.
     */
    public LocalLinearAttention withIncomingState(INDArray kvIn) {
        return new LocalLinearAttention(op, decay, causal, documents, kvIn);
    }

    /** The state restarts at every document of the batch; padding adds nothing. */
    @Override
    public LocalLinearAttention withDocuments(Documents documents) {
        return new LocalLinearAttention(op, decay, causal, documents, kvIn);
    }

    /** {@link LinearAttention#forward} of the whole sequence from a zero state. */
    @Override
    public LinearAttentionOutput forward(INDArray q, INDArray k, INDArray v) {
        return op.forward(q, k, v, decay, causal, kvIn, documents);
    }

    /** {@link LinearAttention#backward} from the states {@code forward} cached. */
    @Override
    public LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, LinearAttentionOutput forward,
                                             INDArray dO) {
        return op.backward(q, k, v, decay, causal, kvIn, dO, null, forward.cache(), documents);
    }

    @Override
    public String toString() {
        return "LocalLinearAttention(" + op + ", " + decay + ", causal=" + causal + ")";
    }
}
