package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.CollectiveHandle;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.distributed.transport.Transport;
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
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * WallFacer multi-ring attention (Liu et al., WallFacer, section 3, algorithm 1): teams of {@code C} consecutive
 * ranks all-gather q, k, v; the {@code P/C} teams form {@code C} team groups of {@code R = P/C^2} teams; member
 * {@code l} of a team in group {@code g} runs a sub-ring with the members of local rank {@code l} of the other
 * teams of its group, over the K/V blocks of team group {@code (g + l) mod C}, so each member sees {@code N/C}
 * keys in {@code R} steps; a reduce-scatter with the attention merge inside the team gives each member its rows.
 * <pre>
 *   P = 8, C = 2: teams {0,1} {2,3} {4,5} {6,7}; groups {T0,T1} {T2,T3}; R = 2
 *   member l = 0 of T0, T1 circulates the K/V of T0, T1; member l = 1 of T0, T1 those of T2, T3 (and vice versa)
 * </pre>
 * The initial send targets and ring neighbours follow the paper's configuration generator (algorithms 2-3) in
 * this form: rank (team t', local l') sends its team's K/V to the team at the same place in group
 * {@code (g(t') - l') mod C}, local rank l'; ring neighbours are the teams before and after it in its group.
 * C = 1 is ring attention. The backward pass is the paper's (section 3.2.1): K/V stay, with their dK/dV, and the
 * query blocks (q, dO, LSE, Delta) circulate the sub-rings with a travelling dQ, which finally goes home. Blocks whose
 * every query-key pair is masked (causal, sliding window) are skipped without a kernel call, in both passes.
 * Bytes sent per rank, with the shard sizes {@code X = B H (N/P) D w}, {@code X_kv = B Hkv (N/P) D w},
 * {@code X_lse = B H (N/P) w}, local rank {@code l} and sends to oneself free:
 * <pre>
 *   forward   (C-1)(X + 2 X_kv)                 team all-gather of q, k, v
 *           + [l != 0] 2 C X_kv                 first K/V block to its sub-ring
 *           + (R-1) 2 C X_kv                    sub-ring hops
 *           + (C-1)(X + X_lse)                  team reduce-scatter of (O, LSE)
 *   backward  (C-1)(2 X + 2 X_lse + 2 X_kv)     team all-gather of q, dO, LSE, Delta, k, v
 *           + [l != 0] C (2 X + 2 X_lse)        first query bundle to its sub-ring
 *           + (R-1) C (2 X + 2 X_lse + X)       sub-ring hops of bundles and of dQ
 *           + [l != 0 or R > 1] C X             dQ home
 *           + (C-1)(X + 2 X_kv)                 team reduce-scatter of dQ, dK, dV
 * </pre>
 * WallFacer's equations 2-4 count the same terms per layer (section 3.2.2); with C = 1 the forward is exactly
 * ring attention's {@code (P-1) 2 X_kv}.
 *
 * <p>Not thread-safe; one instance per worker; every member makes the same calls in the same order.
 */
public final class WallFacerAttention implements SequenceParallelAttention<RingAttention.Forward> {

    private final int c;
    private final int teams;
    private final int ringSize;
    private final int team;
    private final int local;
    private final Communicator world;
    private final Communicator teamComm;
    private final SequenceLayout layout;
    private final int length;
    private final AttentionMask mask;
    private final FlashAttention flash = FlashAttention.defaults();
    private final int[] teamPositions;

    /**
     * @param transport the job's transport (all P ranks)
     * @param c         team size (replication factor), {@code C^2} must divide P
     * @param layout    which positions each rank holds
     * @param length    the global sequence length N
     * @param causal    causal masking by global position
     * @param window    sliding window width, 0 for none
     */
    public WallFacerAttention(Transport transport, int c, SequenceLayout layout, int length, boolean causal,
                              int window) {
        this(transport, Channels.SEQUENCE, c, layout, length, causal, window);
    }

    /**
     * As {@link #WallFacerAttention(Transport, int, SequenceLayout, int, boolean, int)} on the first two channels of
     * a block (the world's ring, the teams).
     */
    public WallFacerAttention(Transport transport, Channels channels, int c, SequenceLayout layout, int length,
                              boolean causal, int window) {
        int p = transport.worldSize();
        if (c < 1 || p % (c * c) != 0) {
            throw new IllegalArgumentException("WallFacerAttention: team size C = " + c + " with " + p
                    + " workers; C^2 must divide P (C = 1 is ring attention)");
        }
        this.c = c;
        this.teams = p / c;
        this.ringSize = p / (c * c);
        this.team = transport.rank() / c;
        this.local = transport.rank() % c;
        this.layout = layout;
        this.length = length;
        this.world = channels.world(transport, 0);
        int[] members = new int[c];
        for (int i = 0; i < c; i++) {
            members[i] = team * c + i;
        }
        this.teamComm = Communicator.of(transport, Group.of(transport, members), channels.get(1));
        this.teamPositions = positionsOfTeam(team);
        this.mask = AttentionMask.builder().causal(causal).window(window).build();
    }

    private WallFacerAttention(WallFacerAttention base, Documents documents) {
        this.c = base.c;
        this.teams = base.teams;
        this.ringSize = base.ringSize;
        this.team = base.team;
        this.local = base.local;
        this.layout = base.layout;
        this.length = base.length;
        this.world = base.world;
        this.teamComm = base.teamComm;
        this.teamPositions = base.teamPositions;
        this.mask = base.mask.withDocuments(BlockMasks.checkDocuments("WallFacerAttention", documents, length));
    }

    /** Attention within each document: blocks whose queries and keys share no document are not computed. */
    @Override
    public WallFacerAttention withDocuments(Documents documents) {
        return new WallFacerAttention(this, documents);
    }

    /** The forward pass on this worker's shards; returns its (O, LSE) and keeps nothing. */
    @Override
    public RingAttention.Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        int[] own = layout.positions(world.group().index(), world.group().size(), length);
        // Shapes first: a bad shard is refused here, before anything is sent.
        AttentionShapes.of("WallFacerAttention", q, k, v, AttentionMask.builder().queryPositions(own)
                .keyPositions(own).documents(mask.documents()).build());
        INDArray qTeam = gather(q);
        INDArray kvTeam = Nd4j.stack(0, gather(k), gather(v));
        int[] source = {initialSource()};
        INDArray kv = world.sendRecv(initialTarget(), kvTeam, source[0]);
        int blockTeam = source[0] / c;
        AttentionOutput acc = null;
        INDArray spare = spareFor(kv);
        for (int s = 0; s < ringSize; s++) {
            CollectiveHandle<INDArray> next = s < ringSize - 1 ? rotate(kv, spare) : null;
            if (!BlockMasks.fullyMasked(mask, teamPositions, positionsOfTeam(blockTeam))) {
                acc = merge(acc, flash.forward(qTeam, slice(kv, 0), slice(kv, 1), hop(blockTeam), scale));
            }
            if (next != null) {
                spare = spare == null ? null : kv;
                kv = next.join();
                blockTeam = previousInRing(blockTeam);
            }
        }
        if (acc == null) {       // every visiting block was masked out for all of the team's queries
            acc = new AttentionOutput(Nd4j.zeros(qTeam.dataType(), qTeam.shape()), Nd4j.valueArrayOf(
                    new long[] {qTeam.size(0), qTeam.size(1), qTeam.size(2)}, Double.NEGATIVE_INFINITY,
                    qTeam.dataType()));
        }
        List<INDArray[]> blocks = new ArrayList<>();
        for (int j = 0; j < c; j++) {
            blocks.add(new INDArray[] {rows(acc.output(), j), rows(acc.lse(), j)});
        }
        INDArray[] mine = teamComm.reduceScatter(Reduction.attentionMerge(), blocks);
        return new RingAttention.Forward(new AttentionOutput(mine[0], mine[1]));
    }

    /**
     * The backward pass for this worker's {@code dO}, given its forward result, as the paper's section 3.2.1 has it:
     * the team's K/V stay where they are (with their dK/dV accumulators) while the query blocks, each with its
     * dO, LSE, {@code Delta = rowsum(O * dO)} and a travelling dQ, circulate the same sub-rings in the opposite
     * roles.
     * <pre>
     *   gather q, dO, LSE, Delta in the team; send this query bundle to the rank that sent the first K/V block
     *   R steps: post the bundle to the next ring member; flash backward of (bundle, team K/V); dQ moves on
     *   the last holder sends each dQ home; team reduce-scatter (sum) of dQ and of dK, dV
     * </pre>
     */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, RingAttention.Forward out, INDArray dO,
                                       double scale) {
        INDArray qTeam = gather(q);
        INDArray deltaTeam = gather(FlashAttention.delta(out.output(), dO));
        INDArray lseTeam = gather(out.lse());
        INDArray doTeam = gather(dO);
        INDArray kTeam = gather(k);
        INDArray vTeam = gather(v);
        long[] qShape = qTeam.shape();
        long[] lseShape = lseTeam.shape();
        // This rank's K/V block is visited by the query blocks of team group g - l: it receives the first one from
        // the rank it sent K/V to in the forward pass and sends its own to the rank it received K/V from.
        INDArray query = Bundle.pack(qTeam, doTeam, lseTeam, deltaTeam);
        INDArray bundle = world.sendRecv(initialSource(), query, initialTarget());
        INDArray dk = Nd4j.zeros(kTeam.dataType(), kTeam.shape());
        INDArray dv = Nd4j.zeros(vTeam.dataType(), vTeam.shape());
        INDArray dqVisiting = Nd4j.zeros(qTeam.dataType(), qShape);
        INDArray spare = spareFor(bundle);
        for (int s = 0; s < ringSize; s++) {
            CollectiveHandle<INDArray> next = s < ringSize - 1 ? rotate(bundle, spare) : null;
            int queryTeam = teamAt(group(team) - local, placeInGroup(team) - s);
            AttentionMask m = mask.toBuilder().queryPositions(positionsOfTeam(queryTeam))
                    .keyPositions(teamPositions).build();
            if (!BlockMasks.fullyMasked(m, positionsOfTeam(queryTeam), teamPositions)) {
                INDArray[] b = Bundle.unpack(bundle, qShape, qShape, lseShape, lseShape);     // q, dO, LSE, Delta
                AttentionGradients g = flash.backwardFromDelta(b[0], kTeam, vTeam, b[3], b[2], b[1], m, scale);
                dqVisiting.addi(g.dq());
                dk.addi(g.dk());
                dv.addi(g.dv());
            }
            if (next != null) {
                dqVisiting = world.sendRecv(ringNext(), dqVisiting, ringPrevious());
                spare = spare == null ? null : bundle;
                bundle = next.join();
            }
        }
        // The last holder of each query block sends its dQ straight home (R - 1 ring hops + this one).
        int home = teamAt(group(team) - local, placeInGroup(team) + 1) * c + local;
        int from = teamAt(group(team) + local, placeInGroup(team) - 1) * c + local;
        INDArray dqTeam = world.sendRecv(home, dqVisiting, from);
        return new AttentionGradients(sumRows(dqTeam), sumRows(dk), sumRows(dv));
    }

    /**
     * A second buffer of {@code block}'s shape when every rank holds as many positions (the blocks that go round
     * a sub-ring are then of one shape), so each hop receives straight into the buffer the previous hop computed
     * on, in slices for large blocks; null otherwise (each hop receives a new array).
     */
    private INDArray spareFor(INDArray block) {
        int p = world.group().size();
        int n = layout.positions(0, p, length).length;
        for (int m = 1; m < p; m++) {
            if (layout.positions(m, p, length).length != n) {
                return null;
            }
        }
        return ringSize > 1 ? Nd4j.createUninitialized(block.dataType(), block.shape(), 'c') : null;
    }

    /** One hop round the sub-ring: into {@code spare} when there is one (its previous contents are done with). */
    private CollectiveHandle<INDArray> rotate(INDArray block, INDArray spare) {
        return spare == null ? world.sendRecvAsync(ringNext(), block, ringPrevious())
                : world.sendRecvAsync(ringNext(), block, ringPrevious(), spare);
    }

    private AttentionOutput merge(AttentionOutput acc, AttentionOutput part) {
        return acc == null ? part : AttentionMerge.merge(acc, part);
    }

    private AttentionMask hop(int blockTeam) {
        return mask.toBuilder().queryPositions(teamPositions).keyPositions(positionsOfTeam(blockTeam)).build();
    }

    private int group(int t) {
        return t / ringSize;
    }

    private int placeInGroup(int t) {
        return t % ringSize;
    }

    private int teamAt(int group, int place) {
        return Math.floorMod(group, c) * ringSize + Math.floorMod(place, ringSize);
    }

    /** Rank that gets this rank's team block first: same place, group g(t) - l, same local rank. */
    private int initialTarget() {
        return teamAt(group(team) - local, placeInGroup(team)) * c + local;
    }

    /** Rank whose team block this rank gets first: same place, group g(t) + l, same local rank. */
    private int initialSource() {
        return teamAt(group(team) + local, placeInGroup(team)) * c + local;
    }

    private int ringNext() {
        return teamAt(group(team), placeInGroup(team) + 1) * c + local;
    }

    private int ringPrevious() {
        return teamAt(group(team), placeInGroup(team) - 1) * c + local;
    }

    /** The team whose block arrives next from the previous ring member (blocks move one place forward). */
    private int previousInRing(int blockTeam) {
        return teamAt(group(blockTeam), placeInGroup(blockTeam) - 1);
    }

    private int[] positionsOfTeam(int t) {
        int p = teams * c;
        int[] all = new int[0];
        for (int i = 0; i < c; i++) {
            int[] mine = layout.positions(t * c + i, p, length);
            int[] joined = java.util.Arrays.copyOf(all, all.length + mine.length);
            System.arraycopy(mine, 0, joined, all.length, mine.length);
            all = joined;
        }
        return all;
    }

    private INDArray gather(INDArray local) {
        return Nd4j.concat(2, teamComm.allGather(local.dup('c')).toArray(new INDArray[0]));
    }

    private INDArray sumRows(INDArray full) {
        List<INDArray[]> blocks = new ArrayList<>();
        for (int j = 0; j < c; j++) {
            blocks.add(new INDArray[] {rows(full, j)});
        }
        return teamComm.reduceScatter(Reduction.sum(), blocks)[0];
    }

    private INDArray rows(INDArray a, int j) {
        long n = a.size(2) / c;
        INDArrayIndex[] idx = new INDArrayIndex[a.rank()];
        for (int d = 0; d < a.rank(); d++) {
            idx[d] = d == 2 ? NDArrayIndex.interval(j * n, (j + 1) * n) : NDArrayIndex.all();
        }
        return a.get(idx).dup('c');
    }

    private static INDArray slice(INDArray stacked, int i) {
        return stacked.get(NDArrayIndex.point(i), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                NDArrayIndex.all());
    }
}
