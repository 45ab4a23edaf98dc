package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.CollectiveHandle;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionMerge;
import org.attn4j.ops.flash.AttentionOutput;
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
 * C = 1 is ring attention. The backward pass here keeps the team's queries fixed and circulates K/V with
 * travelling dK/dV accumulators (as {@link RingAttention} does), then returns them to the team that sent the
 * block and sums the C copies with a team reduce-scatter; the paper instead fixes K/V and circulates Q and dQ
 * (section 3.2.1). Both give the same gradients.
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
        this.world = Communicator.of(transport, Group.world(transport), 3);
        int[] members = new int[c];
        for (int i = 0; i < c; i++) {
            members[i] = team * c + i;
        }
        this.teamComm = Communicator.of(transport, Group.of(transport, members), 1);
        this.teamPositions = positionsOfTeam(team);
        this.mask = AttentionMask.builder().causal(causal).window(window).build();
    }

    /** The forward pass on this worker's shards; returns its (O, LSE) and keeps nothing. */
    @Override
    public RingAttention.Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        INDArray qTeam = gather(q);
        INDArray kvTeam = Nd4j.stack(0, gather(k), gather(v));
        int[] source = {initialSource()};
        INDArray kv = world.sendRecv(initialTarget(), kvTeam, source[0]);
        int blockTeam = source[0] / c;
        AttentionOutput acc = null;
        for (int s = 0; s < ringSize; s++) {
            CollectiveHandle<INDArray> next = s < ringSize - 1 ? world.sendRecvAsync(ringNext(), kv, ringPrevious())
                    : null;
            acc = merge(acc, flash.forward(qTeam, slice(kv, 0), slice(kv, 1), hop(blockTeam), scale));
            if (next != null) {
                kv = next.join();
                blockTeam = previousInRing(blockTeam);
            }
        }
        List<INDArray[]> blocks = new ArrayList<>();
        for (int j = 0; j < c; j++) {
            blocks.add(new INDArray[] {rows(acc.output(), j), rows(acc.lse(), j)});
        }
        INDArray[] mine = teamComm.reduceScatter(Reduction.attentionMerge(), blocks);
        return new RingAttention.Forward(new AttentionOutput(mine[0], mine[1]));
    }

    /** The backward pass for this worker's {@code dO}, given its forward result. */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, RingAttention.Forward out, INDArray dO,
                                       double scale) {
        INDArray qTeam = gather(q);
        INDArray oTeam = gather(out.output());
        INDArray lseTeam = gather(out.lse());
        INDArray doTeam = gather(dO);
        INDArray kvTeam = Nd4j.stack(0, gather(k), gather(v));
        int source = initialSource();
        INDArray kv = world.sendRecv(initialTarget(), kvTeam, source);
        int blockTeam = source / c;
        INDArray dqTeam = Nd4j.zeros(q.dataType(), qTeam.shape());
        INDArray grads = Nd4j.zeros(kv.dataType(), kv.shape());
        for (int s = 0; s < ringSize; s++) {
            CollectiveHandle<INDArray> next = s < ringSize - 1 ? world.sendRecvAsync(ringNext(), kv, ringPrevious())
                    : null;
            AttentionGradients g = flash.backward(qTeam, slice(kv, 0), slice(kv, 1), oTeam, lseTeam, doTeam,
                    hop(blockTeam), scale);
            dqTeam.addi(g.dq());
            slice(grads, 0).addi(g.dk());
            slice(grads, 1).addi(g.dv());
            grads = world.sendRecv(ringNext(), grads, ringPrevious());      // R hops bring them back here
            if (next != null) {
                kv = next.join();
                blockTeam = previousInRing(blockTeam);
            }
        }
        // Back to the rank that sent the block, then the C copies of each team block are summed in the team.
        INDArray home = world.sendRecv(source, grads, initialTarget());
        INDArray dq = sumRows(dqTeam);
        INDArray dk = sumRows(slice(home, 0).dup('c'));
        INDArray dv = sumRows(slice(home, 1).dup('c'));
        return new AttentionGradients(dq, dk, dv);
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
