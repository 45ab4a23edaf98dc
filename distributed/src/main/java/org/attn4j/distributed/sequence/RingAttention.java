package org.attn4j.distributed.sequence;

import org.attn4j.distributed.collective.CollectiveHandle;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
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
 *   backward: K/V stay; q, dO, LSE and Delta travel the other way with a dQ accumulator (algorithm 2), or,
 *             when K/V are the smaller side (GQA), K/V travel again with their dK, dV accumulators
 * </pre>
 * The local kernel is {@link FlashAttention} with the global positions of the queries and of the visiting keys,
 * so any {@link SequenceLayout} works, and hops whose whole block is masked (causal, sliding window) are
 * skipped without a kernel call. With a sliding window the shards also stop travelling once no member further on
 * can see them ({@link #steps()} steps instead of P): windowed ring attention whose traffic shrinks with the
 * window. K/V heads travel as they are (GQA: never repeated). Bytes per worker, with {@code S} steps
 * ({@code S = P} without a window) and the shard sizes {@code X_q}, {@code X_kv}, {@code X_lse}: forward
 * {@code (S-1) 2 X_kv}; backward {@code (S-1)(3 X_q + 2 X_lse) + X_q} when the queries travel (BurstAttention's
 * table 1: {@code 3BZNd + 2BZN}), {@code (S-1) 2 X_kv + S 2 X_kv} when K/V do (the last term 0 for S = 1).
 *
 * <p>Not thread-safe; one instance per worker and sequence group, calls in the same order on every member.
 */
public final class RingAttention implements SequenceParallelAttention<RingAttention.Forward> {

    /** This worker's rows of the result; the backward pass needs nothing else. */
    public record Forward(AttentionOutput local) implements SequenceParallelAttention.SoftmaxPass {
    }

    private final Communicator comm;
    private final SequenceLayout layout;
    private final int length;
    private final AttentionMask mask;
    private final FlashAttention flash;
    private final int hops;

    private RingAttention(RingAttention base, Documents documents) {
        this.comm = base.comm;
        this.layout = base.layout;
        this.length = base.length;
        this.mask = base.mask.withDocuments(BlockMasks.checkDocuments("RingAttention", documents, length));
        this.flash = base.flash;
        this.hops = base.hops;           // K/V travel as without documents; hops sharing none are not computed
    }

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

    /** Attention within each document: hops whose queries and keys share no document are not computed. */
    @Override
    public RingAttention withDocuments(Documents documents) {
        return new RingAttention(this, documents);
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
                .keyPositions(qPos).documents(mask.documents()).build());
        INDArray kv = Nd4j.stack(0, k, v);
        INDArray spare = spareFor(kv);
        AttentionOutput acc = null;
        for (int s = 0; s < hops; s++) {
            int src = (me - s + p) % p;
            CollectiveHandle<INDArray> next = s < hops - 1 ? rotate(comm.group().next(), kv, comm.group().previous(),
                    spare) : null;
            int[] kPos = positions(src);
            if (!fullyMasked(qPos, kPos)) {
                AttentionOutput part = flash.forward(q, slice(kv, 0), slice(kv, 1), hop(qPos, kPos), scale);
                acc = acc == null ? part : AttentionMerge.merge(acc, part);
            }
            if (next != null) {
                spare = spare == null ? null : kv;
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
     * The backward pass on this worker's shards, given its forward result. Whichever side is fewer bytes per hop
     * travels: as BurstAttention's algorithm 2, the K/V shards stay (with their dK/dV) while each worker's query
     * bundle (q, dO, LSE, {@code Delta = rowsum(O * dO)}) and its dQ go round the ring the other way; or, when K/V
     * are the smaller side ({@code 4 Hkv D < 3 H D + 2 H}, grouped-query attention with H/Hkv of about 4/3 or
     * more), the K/V shards travel again with their dK/dV.
     *
     * @param out the {@link #forward} result of these shards
     * @param dO  gradient with respect to the local output
     * @return local dQ, dK, dV
     */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward out, INDArray dO, double scale) {
        return queriesTravel(q, k) ? backwardMovingQueries(q, k, v, out, dO, scale)
                : backwardMovingKeys(q, k, v, out, dO, scale);
    }

    /**
     * Whether the backward pass moves the query side (q, dO, LSE, Delta and dQ: {@code 3 H D + 2 H} elements per
     * row) rather than the key side (K, V, dK, dV: {@code 4 Hkv D}); ties go to the paper's query side.
     */
    public static boolean queriesTravel(INDArray q, INDArray k) {
        long h = q.size(1);
        long d = q.size(3);
        return 3 * h * d + 2 * h <= 4 * k.size(1) * d;
    }

    /** BurstAttention's algorithm 2: K/V fixed, query bundles and dQ circulate (towards the previous member). */
    private AttentionGradients backwardMovingQueries(INDArray q, INDArray k, INDArray v, Forward out, INDArray dO,
                                                     double scale) {
        int p = comm.group().size();
        int me = comm.group().index();
        int[] kPos = positions(me);
        long[] qShape = q.shape();
        long[] rowShape = out.lse().shape();
        INDArray bundle = Bundle.pack(q, dO, out.lse(), FlashAttention.delta(out.output(), dO));
        INDArray dk = Nd4j.zeros(k.dataType(), k.shape());
        INDArray dv = Nd4j.zeros(v.dataType(), v.shape());
        INDArray dqVisiting = Nd4j.zeros(q.dataType(), qShape);
        INDArray dq = null;
        INDArray spare = spareFor(bundle);
        for (int s = 0; s < hops; s++) {
            // Queries travel the other way round from the forward's K/V, so the worker s places on holds them:
            // the same (query shard, key shard) pairs as forward step s, and the same steps can be left out.
            int owner = (me + s) % p;
            CollectiveHandle<INDArray> next = s < hops - 1 ? rotate(comm.group().previous(), bundle,
                    comm.group().next(), spare) : null;
            int[] qPos = positions(owner);
            if (!fullyMasked(qPos, kPos)) {
                INDArray[] b = Bundle.unpack(bundle, qShape, qShape, rowShape, rowShape);   // q, dO, LSE, Delta
                AttentionGradients g = flash.backwardFromDelta(b[0], k, v, b[3], b[2], b[1], hop(qPos, kPos),
                        scale);
                dqVisiting.addi(g.dq());
                dk.addi(g.dk());
                dv.addi(g.dv());
            }
            if (next != null) {
                dqVisiting = comm.sendRecv(comm.group().previous(), dqVisiting, comm.group().next());
                spare = spare == null ? null : bundle;
                bundle = next.join();
            } else {
                dq = comm.sendRecv(owner, dqVisiting, (me - s + p) % p);       // straight home
            }
        }
        return new AttentionGradients(dq, dk, dv);
    }

    /** K/V circulate again with travelling dK/dV accumulators; dQ stays. */
    private AttentionGradients backwardMovingKeys(INDArray q, INDArray k, INDArray v, Forward out, INDArray dO,
                                                  double scale) {
        int p = comm.group().size();
        int me = comm.group().index();
        int[] qPos = positions(me);
        INDArray dq = Nd4j.zeros(q.dataType(), q.shape());
        INDArray kv = Nd4j.stack(0, k, v);
        INDArray grads = Nd4j.zeros(kv.dataType(), kv.shape());        // [dK; dV] of the visiting shard
        INDArray spare = spareFor(kv);
        for (int s = 0; s < hops; s++) {
            int src = (me - s + p) % p;
            CollectiveHandle<INDArray> nextKv = s < hops - 1 ? rotate(comm.group().next(), kv,
                    comm.group().previous(), spare) : null;
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
                spare = spare == null ? null : kv;
                kv = nextKv.join();
            }
        }
        return new AttentionGradients(dq, slice(grads, 0).dup(), slice(grads, 1).dup());
    }

    /**
     * A second buffer of {@code block}'s shape for a rotation of equal shards (every member holds as many
     * positions), so that each hop receives straight into the buffer the previous hop computed on, in slices for
     * large blocks; null when the shards differ in length (each hop then receives a new array).
     */
    private INDArray spareFor(INDArray block) {
        int p = comm.group().size();
        int n = positions(0).length;
        for (int m = 1; m < p; m++) {
            if (positions(m).length != n) {
                return null;
            }
        }
        return hops > 1 ? Nd4j.createUninitialized(block.dataType(), block.shape(), 'c') : null;
    }

    /** One hop of a rotation: into {@code spare} when there is one (its previous contents are done with). */
    private CollectiveHandle<INDArray> rotate(int to, INDArray block, int from, INDArray spare) {
        return spare == null ? comm.sendRecvAsync(to, block, from) : comm.sendRecvAsync(to, block, from, spare);
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
