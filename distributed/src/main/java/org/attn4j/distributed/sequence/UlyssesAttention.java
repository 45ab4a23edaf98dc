package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.Communicator;
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
 * DeepSpeed-Ulysses, the baseline the sequence-parallel papers compare with (BurstAttention section 5,
 * WallFacer section 6): an all-to-all turns sequence shards into head shards, every worker runs ordinary
 * attention over the whole sequence for {@code H/P} heads, and a second all-to-all turns the output back.
 * <pre>
 *   [B, H, N/P, D] per worker  --all-to-all-->  [B, H/P, N, D]  --flash-->  O, LSE  --all-to-all-->  [B, H, N/P, D]
 * </pre>
 * Its degree is bounded by the head counts: P must divide both H and Hkv (K/V heads are split, never repeated).
 * Works with any {@link SequenceLayout}: the gathered sequence keeps the members' global positions, and masks
 * follow them. Communication per worker: forward {@code 3 (P-1)/P} of its q, k, v shards in and
 * {@code (P-1)/P} of O and LSE back; backward the same for dO and dQ, dK, dV.
 *
 * <p>Not thread-safe; one instance per worker; every member makes the same calls in the same order.
 */
public final class UlyssesAttention implements SequenceParallelAttention<UlyssesAttention.Forward> {

    private final Communicator comm;
    private final SequenceLayout layout;
    private final int length;
    private final AttentionMask mask;
    private final FlashAttention flash = FlashAttention.defaults();

    /** What the backward pass needs: this worker's head-sharded inputs and result. */
    public record Forward(AttentionOutput local, INDArray q, INDArray k, INDArray v, AttentionOutput heads)
            implements SequenceParallelAttention.SoftmaxPass {
    }

    /**
     * @param comm   the sequence-parallel group; member {@code i} holds shard {@code i} of the layout
     * @param layout which positions each member holds
     * @param length the global sequence length N
     * @param causal causal masking by global position
     * @param window sliding window width, 0 for none
     */
    public UlyssesAttention(Communicator comm, SequenceLayout layout, int length, boolean causal, int window) {
        this.comm = comm;
        this.layout = layout;
        this.length = length;
        int[] all = layout.gathered(comm.group().size(), length);
        this.mask = AttentionMask.builder().causal(causal).window(window).queryPositions(all).keyPositions(all)
                .build();
    }

    private UlyssesAttention(UlyssesAttention base, Documents documents) {
        this.comm = base.comm;
        this.layout = base.layout;
        this.length = base.length;
        this.mask = base.mask.withDocuments(BlockMasks.checkDocuments("UlyssesAttention", documents, length));
    }

    /** Attention within each document, over the gathered sequence of each worker's heads. */
    @Override
    public UlyssesAttention withDocuments(Documents documents) {
        return new UlyssesAttention(this, documents);
    }

    /**
     * The forward pass on this worker's shards {@code [B, H, N/P, D]} and {@code [B, Hkv, N/P, D]}.
     *
     * @throws IllegalArgumentException if P does not divide H and Hkv
     */
    @Override
    public Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        int p = comm.group().size();
        int[] mine = layout.positions(comm.group().index(), p, length);
        // Shapes first: a bad shard is refused here, before anything is sent.
        AttentionShapes.of("UlyssesAttention", q, k, v, AttentionMask.builder().queryPositions(mine)
                .keyPositions(mine).documents(mask.documents()).build());
        if (q.size(1) % p != 0 || k.size(1) % p != 0) {
            throw new IllegalArgumentException("UlyssesAttention: " + p + " workers, but q has " + q.size(1)
                    + " heads and k has " + k.size(1) + "; Ulysses gives each worker whole heads, so the number of "
                    + "workers must divide both (its degree is bounded by the " + k.size(1) + " K/V heads)");
        }
        INDArray qh = toHeads(q);
        INDArray kh = toHeads(k);
        INDArray vh = toHeads(v);
        AttentionOutput heads = flash.forward(qh, kh, vh, mask, scale);
        AttentionOutput local = new AttentionOutput(toSequence(heads.output()), toSequence(heads.lse()));
        return new Forward(local, qh, kh, vh, heads);
    }

    /** The backward pass for this worker's output gradient {@code dO [B, H, N/P, D]}. */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward f, INDArray dO, double scale) {
        AttentionGradients g = flash.backward(f.q(), f.k(), f.v(), f.heads().output(), f.heads().lse(), toHeads(dO),
                mask, scale);
        return new AttentionGradients(toSequence(g.dq()), toSequence(g.dk()), toSequence(g.dv()));
    }

    /** {@code [B, H, N/P, ...]} sequence shard to {@code [B, H/P, N, ...]}: my head group, all positions. */
    private INDArray toHeads(INDArray x) {
        int p = comm.group().size();
        long group = x.size(1) / p;
        List<INDArray> blocks = new ArrayList<>();
        for (int j = 0; j < p; j++) {
            blocks.add(x.get(range(x.rank(), 1, j * group, (j + 1) * group)).dup('c'));
        }
        List<INDArray> got = comm.allToAll(blocks);
        return Nd4j.concat(2, got.toArray(new INDArray[0]));
    }

    /** {@code [B, H/P, N, ...]} head shard back to {@code [B, H, N/P, ...]}: all heads, my positions. */
    private INDArray toSequence(INDArray y) {
        int p = comm.group().size();
        long local = y.size(2) / p;
        List<INDArray> blocks = new ArrayList<>();
        for (int i = 0; i < p; i++) {
            blocks.add(y.get(range(y.rank(), 2, i * local, (i + 1) * local)).dup('c'));
        }
        List<INDArray> got = comm.allToAll(blocks);
        return Nd4j.concat(1, got.toArray(new INDArray[0]));
    }

    private static INDArrayIndex[] range(int rank, int dim, long from, long to) {
        INDArrayIndex[] idx = new INDArrayIndex[rank];
        for (int d = 0; d < rank; d++) {
            idx[d] = d == dim ? NDArrayIndex.interval(from, to) : NDArrayIndex.all();
        }
        return idx;
    }

    @Override
    public String toString() {
        return "UlyssesAttention{" + layout + ", N=" + length + ", " + comm.group() + "}";
    }
}
