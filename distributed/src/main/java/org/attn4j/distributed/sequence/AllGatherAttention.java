package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.AttentionShapes;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * All-gather K/V context parallelism, as Llama 3 trained its long-context stages (The Llama 3 Herd of Models,
 * 2024, its context parallelism): every rank all-gathers K and V, attends its own queries to the whole sequence
 * with the flash kernel by global positions, and in the backward pass reduce-scatters the dK and dV it computed for
 * every position back to their owners.
 * <pre>
 *   forward:   K, V = allGather(k, v)          [B, Hkv, N, D] on every rank (GQA keeps them small)
 *              O, LSE = flash(q, K, V)          q's and the keys' global positions mask it (causal, window)
 *   backward:  dq, dK, dV = flash'(q, K, V, O, LSE, dO)
 *              dk, dv = reduceScatter(dK, dV)   each rank gets the sum for its own positions
 * </pre>
 * Any {@link SequenceLayout} works; for causal masks the zigzag layout gives every rank the same work (the
 * paper's two chunks per rank). Bytes per rank: forward {@code (P-1) 2 X_kv}, backward {@code (P-1) 2 X_kv}; the
 * gathered K and V ({@code 2 P X_kv}) are kept from the forward pass for the backward pass.
 *
 * <p>Not thread-safe; one instance per worker and sequence group, calls in the same order on every member.
 */
public final class AllGatherAttention implements SequenceParallelAttention<AllGatherAttention.Forward> {

    /**
     * This worker's rows of the result and the gathered K and V.
     *
     * @param local this worker's O and LSE
     * @param keys  every member's keys in member order {@code [B, Hkv, N, D]}
     * @param values every member's values
     */
    public record Forward(AttentionOutput local, INDArray keys, INDArray values)
            implements SequenceParallelAttention.SoftmaxPass {
    }

    private final Communicator comm;
    private final SequenceLayout layout;
    private final int length;
    private final AttentionMask mask;
    private final FlashAttention flash = FlashAttention.defaults();

    /**
     * @param comm   the sequence-parallel group; member {@code i} holds shard {@code i} of the layout
     * @param layout which positions each member holds
     * @param length the global sequence length N
     * @param causal causal masking by global position
     * @param window sliding window width, 0 for none
     */
    public AllGatherAttention(Communicator comm, SequenceLayout layout, int length, boolean causal, int window) {
        this.comm = comm;
        this.layout = layout;
        this.length = length;
        int p = comm.group().size();
        this.mask = AttentionMask.builder().causal(causal).window(window)
                .queryPositions(layout.positions(comm.group().index(), p, length))
                .keyPositions(layout.gathered(p, length)).build();
    }

    private AllGatherAttention(AllGatherAttention base, Documents documents) {
        this.comm = base.comm;
        this.layout = base.layout;
        this.length = base.length;
        this.mask = base.mask.withDocuments(BlockMasks.checkDocuments("AllGatherAttention", documents, length));
    }

    /** Attention within each document of the gathered keys. */
    @Override
    public AllGatherAttention withDocuments(Documents documents) {
        return new AllGatherAttention(this, documents);
    }

    @Override
    public Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        int[] mine = layout.positions(comm.group().index(), comm.group().size(), length);
        // Shapes first: a bad shard is refused here, before anything is sent.
        AttentionShapes.of("AllGatherAttention", q, k, v, AttentionMask.builder().queryPositions(mine)
                .keyPositions(mine).documents(mask.documents()).build());
        INDArray keys = gather(k);
        INDArray values = gather(v);
        return new Forward(flash.forward(q, keys, values, mask, scale), keys, values);
    }

    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward f, INDArray dO, double scale) {
        AttentionGradients g = flash.backward(q, f.keys(), f.values(), f.output(), f.lse(), dO, mask, scale);
        int p = comm.group().size();
        long shard = f.keys().size(2) / p;
        List<INDArray[]> blocks = new ArrayList<>(p);
        for (int j = 0; j < p; j++) {
            blocks.add(new INDArray[] {rows(g.dk(), j * shard, shard), rows(g.dv(), j * shard, shard)});
        }
        INDArray[] mine = comm.reduceScatter(Reduction.sum(), blocks);
        return new AttentionGradients(g.dq(), mine[0], mine[1]);
    }

    /** Every member's shard of {@code x}, concatenated along the sequence in member order. */
    private INDArray gather(INDArray x) {
        return Nd4j.concat(2, comm.allGather(x.dup('c')).toArray(new INDArray[0]));
    }

    private static INDArray rows(INDArray x, long from, long count) {
        INDArrayIndex[] idx = {NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, from + count),
            NDArrayIndex.all()};
        return x.get(idx).dup('c');
    }

    @Override
    public String toString() {
        return "AllGatherAttention{" + layout + ", N=" + length + ", " + comm.group() + "}";
    }
}
