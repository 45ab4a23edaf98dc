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
 * skipped without a kernel call. With a sliding window the shards also stop travelling once no member further on
 * can see them ({@link #steps()} steps instead of P): windowed ring attention whose traffic shrinks with the
 * window. K/V heads travel as they are (GQA: never repeated). Communication per worker, with {@code S} steps
 * ({@code S = P} without a window): forward {@code (S-1)} K/V shards, backward {@code (S-1)} K/V shards and
 * {@code S} dK/dV shards.
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
    private final int hops;

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
        this.hops = hopsNeeded();
    }

    /**
     * How many hops the K/V shards travel: one more than the last hop {@code s} at which some member's queries can
     * see some key of the shard arriving from {@code s} places back. P without a window; with a causal sliding
     * window on the contiguous layout about {@code window / (N/P) + 1}, so a shard stops once no one downstream
     * can see it (every member computes the same number from the layout alone).
     */
    private int hopsNeeded() {
        int p = comm.group().size();
        int last = 0;
        for (int s = 1; s < p; s++) {
            for (int r = 0; r < p && last < s; r++) {
                if (!BlockMasks.fullyMasked(mask, positions(r), positions((r - s + p) % p))) {
                    last = s;
                }
            }
        }
        return last + 1;
    }

    /** How many ring steps a pass takes (1 + the hops a K/V shard travels); P unless a window cuts it short. */
    public int steps() {
        return hops;
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
        for (int s = 0; s < hops; s++) {
            int src = (me - s + p) % p;
            CollectiveHandle<INDArray> next = s < hops - 1
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
        for (int s = 0; s < hops; s++) {
            int src = (me - s + p) % p;
            CollectiveHandle<INDArray> nextKv = s < hops - 1
                    ? comm.sendRecvAsync(comm.group().next(), kv, comm.group().previous()) : null;
            int[] kPos = positions(src);
            if (!fullyMasked(qPos, kPos)) {
                AttentionGradients g = flash.backward(q, slice(kv, 0), slice(kv, 1), out.output(), out.lse(), dO,
                        hop(qPos, kPos), scale);
                dq.addi(g.dq());
                slice(grads, 0).addi(g.dk());
                slice(grads, 1).addi(g.dv());
            }
            // The accumulators move on with their shard; after the last step they go straight home (with all P
            // steps that is one more hop along the ring).
            grads = s < hops - 1 ? comm.sendRecv(comm.group().next(), grads, comm.group().previous())
                    : comm.sendRecv(src, grads, (me + s) % p);
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
