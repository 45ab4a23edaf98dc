package org.attn4j.ops.flash;

import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Softmax attention on one device, behind the same interface as the sequence-parallel algorithms: the case
 * {@code P = 1}, where this worker's shard is the whole sequence. Callers that hold a
 * {@link SequenceParallelAttention} (the attention layers, SameDiff's sequence-parallel op) run on one device or
 * many without a branch of their own.
 *
 * <p>Unlike the distributed algorithms, whose masks are fixed by their layout, this one takes any
 * {@link AttentionMask}, key padding included.
 */
public final class LocalAttention implements SequenceParallelAttention<AttentionOutput> {

    private final FlashAttention op;
    private final AttentionMask mask;

    /**
     * @param op   the kernel settings (tiles, threads)
     * @param mask which keys each query sees
     */
    public LocalAttention(FlashAttention op, AttentionMask mask) {
        if (op == null || mask == null) {
            throw new IllegalArgumentException("LocalAttention: op and mask must not be null, got " + op + ", "
                    + mask);
        }
        this.op = op;
        this.mask = mask;
    }

    /** Attention within each document of the batch, on top of this mask's rules. */
    @Override
    public LocalAttention withDocuments(Documents documents) {
        return new LocalAttention(op, mask.withDocuments(documents));
    }

    /** {@link FlashAttention#forward}: output and log-sum-exp of the whole sequence. */
    @Override
    public AttentionOutput forward(INDArray q, INDArray k, INDArray v, double scale) {
        return op.forward(q, k, v, mask, scale);
    }

    /** {@link FlashAttention#backward} of {@code forward}'s output and log-sum-exp. */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, AttentionOutput forward, INDArray dO,
                                       double scale) {
        return op.backward(q, k, v, forward.output(), forward.lse(), dO, mask, scale);
    }

    @Override
    public String toString() {
        return "LocalAttention(" + mask + ")";
    }
}
