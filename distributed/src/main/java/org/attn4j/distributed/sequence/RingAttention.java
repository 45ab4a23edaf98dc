package org.attn4j.distributed.sequence;

import org.attn4j.distributed.collective.CollectiveHandle;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionMerge;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.AttentionShapes;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Ring attention as BurstAttention does it (Sun et al., BurstAttention, section 3, algorithms 1 and 2): every
 * worker keeps its queries; the key/value shards travel once around the ring of the communicator's group.
 * <pre>
 *   step s:   worker r computes with the K/V shard of worker (r - s) mod P, while it already sends that shard
 *             on to r + 1 and receives the next one from r - 1 (double buffering)
 *   forward:  partial (O, LSE) per step, merged with the stable online-softmax merge (GAO, section 3.1)
 *   backward: dQ stays; dK, dV accumulators travel with their K/V shard and take one last hop home
 * </pre>
 * The local kernel is {@link FlashAttention} with the global positions of the queries and of the visiting keys,
 * so any {@link SequenceLayout} works, and hops whose whole block is masked (causal, sliding window) are
 * skipped without a kernel call. K/V heads travel as they are (GQA: never repeated). Communication per worker:
 * forward {@code (P-1)} K/V shards, backward {@code (P-1)} K/V shards and {@code P} dK/dV shards.
 *
 * <p>Not thread-safe; one instance per worker and sequence group, calls in the same order on every member.
 */
public final class RingAttention implements SequenceParallelAttention<RingAttention.Forward> {

    /** This worker's rows of the result; the backward pass needs nothing else. */
    public record Forward(AttentionOutput local) implements SequenceParallelAttention.Pass {
        @Override
        public INDArray output() {
            return local.output();
        }

        @Override
        public INDArray lse() {
            return local.lse();
        }
    }


    private final Communicator comm;
    private final SequenceLayout layout;
    private final int length;
    private final AttentionMask mask;
    private final FlashAttention flash;

    /**
     * @param comm   the sequence-parallel group; member {@code i} holds shard {@code i} of the layout
     * @param layout which positions each member holds
     * @param length the global sequence length N
     * @param causal causal masking by global position
     * @param window sliding window width, 0 for none
     */
    public RingAttention(Communicator comm, SequenceLayout layout, int length, boolean causal, int window) {
        this.comm = comm;
        this.layout = layout;
        this.length = length;
        this.mask = AttentionMask.builder().causal(causal).window(window).build();
        this.flash = FlashAttention.defaults();
        layout.positions(comm.group().index(), comm.group().size(), length);     // validates the split
    }

    /**
     * The forward pass on this worker's shards.
     *
     * @param q     local queries {@code [B, H, N/P, D]}
     * @param k     local keys {@code [B, Hkv, N/P, D]}
     * @param v     local values {@code [B, Hkv, N/P, D]}
     * @param scale score scale
     * @return this worker's {@code (O, LSE)}, equal to the rows of single-device attention it holds
     */
    @Override
    public Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        int p = comm.group().size();
        int me = comm.group().index();
        int[] qPos = positions(me);
        AttentionShapes.of("RingAttention", q, k, v, AttentionMask.builder().queryPositions(qPos)
                .keyPositions(qPos).build());
        INDArray kv = Nd4j.stack(0, k, v);
        AttentionOutput acc = null;
        for (int s = 0; s < p; s++) {
            int src = (me - s + p) % p;
            CollectiveHandle<INDArray> next = s < p - 1
                    ? comm.sendRecvAsync(comm.group().next(), kv, comm.group().previous()) : null;
            int[] kPos = positions(src);
            if (!fullyMasked(qPos, kPos)) {
                AttentionOutput part = flash.forward(q, slice(kv, 0), slice(kv, 1), hop(qPos, kPos), scale);
                acc = acc == null ? part : AttentionMerge.merge(acc, part);
            }
            if (next != null) {
                kv = next.join();
            }
        }
        if (acc == null) {
            acc = new AttentionOutput(Nd4j.zeros(q.dataType(), q.shape()),
                    Nd4j.valueArrayOf(new long[] {q.size(0), q.size(1), q.size(2)}, Double.NEGATIVE_INFINITY,
                            q.dataType()));
        }
        return new Forward(acc);
    }

    /**
     * The backward pass on this worker's shards, given its forward result.
     *
     * @param out the {@link #forward} result of these shards
     * @param dO  gradient with respect to the local output
     * @return local dQ, dK, dV
     */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward out, INDArray dO, double scale) {
        int p = comm.group().size();
        int me = comm.group().index();
        int[] qPos = positions(me);
        INDArray dq = Nd4j.zeros(q.dataType(), q.shape());
        INDArray kv = Nd4j.stack(0, k, v);
        INDArray grads = Nd4j.zeros(kv.dataType(), kv.shape());        // [dK; dV] of the visiting shard
        for (int s = 0; s < p; s++) {
            int src = (me - s + p) % p;
            CollectiveHandle<INDArray> nextKv = s < p - 1
                    ? comm.sendRecvAsync(comm.group().next(), kv, comm.group().previous()) : null;
            int[] kPos = positions(src);
            if (!fullyMasked(qPos, kPos)) {
                AttentionGradients g = flash.backward(q, slice(kv, 0), slice(kv, 1), out.output(), out.lse(), dO,
                        hop(qPos, kPos), scale);
                dq.addi(g.dq());
                slice(grads, 0).addi(g.dk());
                slice(grads, 1).addi(g.dv());
            }
            // The accumulators move on after this hop's contribution; after P hops they are one hop from home.
            grads = comm.sendRecv(comm.group().next(), grads, comm.group().previous());
            if (nextKv != null) {
                kv = nextKv.join();
            }
        }
        return new AttentionGradients(dq, slice(grads, 0).dup(), slice(grads, 1).dup());
    }

    private int[] positions(int member) {
        return layout.positions(member, comm.group().size(), length);
    }

    private AttentionMask hop(int[] qPos, int[] kPos) {
        return mask.toBuilder().queryPositions(qPos).keyPositions(kPos).build();
    }

    /** Whether no query of this worker can see any key of the visiting shard (whole hop skipped). */
    private boolean fullyMasked(int[] qPos, int[] kPos) {
        return BlockMasks.fullyMasked(mask, qPos, kPos);
    }

    private static INDArray slice(INDArray stacked, int i) {
        return stacked.get(NDArrayIndex.point(i), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                NDArrayIndex.all());
    }
}
