package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * ATTENTION2D without overlap (ATTENTION2D-NO; Elango et al., ATTENTION2D, section 3.2, algorithms 1-3) on an
 * {@code R x C} {@link ProcessorGrid}, {@code P = R C}. Worker {@code w = r + R c} is processor {@code p(r, c)}
 * and holds the cyclic 1D distribution of q, k, v: positions {@code w, w + P, w + 2P, ...}
 * ({@link SequenceLayout#STRIPED}).
 * <pre>
 *   1  K_t, V_t = transpose                     p(r, c) gets key shard c + C r: positions c + C r + i P
 *   2  Q_g = allGather(Q_p) over row r          the queries r + R j of row r, N/R of them
 *   3  K_g, V_g = allGather(K_t, V_t) over column c    the keys c + C j of column c, N/C of them
 *   4  (O, LSE) = flash(Q_g, K_g, V_g)          a partial result over the keys of column c
 *   5  O_p, LSE_p = row reduce-scatter with ATTNFIX (the stable attention merge, algorithms 2 and 7)
 *   backward (algorithm 3): row all-gather Q, O, dO, LSE; column all-gather K_t, V_t; flash backward;
 *   dQ_p = row reduce-scatter (sum); dK_t, dV_t = column reduce-scatter (sum); inverse transpose
 *
 *   P = 6 (3 x 2): score block of p(1, 0) = queries 1, 4, 7, ... x keys 0, 2, 4, ...; every (query, key) pair
 *   is scored by exactly one processor, the one in the query's row and the key's column
 * </pre>
 * The transpose generalises the paper's {@code p(r, c) <-> p(c, r)} exchange: on a rectangle it is the
 * permutation that takes the column-major shard numbering to the row-major one (drawn in {@link ProcessorGrid});
 * each worker sends its K/V shard once and receives one, {@code 2 X_kv} unless it keeps its own. Any partition of
 * the keys over the columns would be exact (section 3.1), even leaving the shards where they are; this one is the
 * paper's: a column's keys are every C-th position and a row's queries every R-th, so on a square grid each
 * processor's causal mask is (strictly) lower triangular in its local indices (the paper's footnote 3), and on any
 * grid each processor scores about {@code N^2 / 2P} causal pairs.
 *
 * <p>Every worker sends {@code (C-1)(2 X_q + X_lse) + (R-1) 2 X_kv} in the forward pass (plus the transpose),
 * {@code O(N D / sqrt(P))} on a near-square grid, where ring attention sends {@code O(N D)}. Masks follow
 * global positions, so the off-diagonal causal masks of the cyclic layout come out of the same kernel.
 *
 * <p>Not thread-safe; one instance per worker; every member makes the same calls in the same order.
 */
public final class Attention2D implements SequenceParallelAttention<Attention2D.Forward> {

    private final Attention2DContext ctx;
    private final AttentionMask mask;
    private final FlashAttention flash = FlashAttention.defaults();

    /**
     * What the backward pass needs: this worker's rows of the result and its transposed K/V shard.
     *
     * @param local this worker's {@code (O, LSE)}
     * @param kt    the key shard this processor holds after the transpose, {@code [B, Hkv, N/P, D]}
     * @param vt    the value shard this processor holds after the transpose
     */
    public record Forward(AttentionOutput local, INDArray kt, INDArray vt)
            implements SequenceParallelAttention.SoftmaxPass {
    }

    /**
     * ATTENTION2D-NO on the most square grid of the transport's workers ({@link ProcessorGrid#forWorkers}).
     *
     * @param transport the job's transport; all its workers form the grid
     * @param length    the global sequence length N, a multiple of P
     * @param causal    causal masking by global position
     * @param window    sliding window width, 0 for none
     * @throws IllegalArgumentException if N is not a positive multiple of P
     */
    public Attention2D(Transport transport, int length, boolean causal, int window) {
        this(transport, ProcessorGrid.forWorkers(transport.worldSize()), length, causal, window);
    }

    /**
     * ATTENTION2D-NO on an explicit grid.
     *
     * @param transport the job's transport
     * @param grid      {@code R x C} with {@code R C} equal to the transport's world size
     * @param length    the global sequence length N, a multiple of P
     * @param causal    causal masking by global position
     * @param window    sliding window width, 0 for none
     * @throws IllegalArgumentException if the grid does not have P processors or N is not a positive multiple of P
     */
    public Attention2D(Transport transport, ProcessorGrid grid, int length, boolean causal, int window) {
        this(transport, Channels.SEQUENCE, grid, length, causal, window);
    }

    /** As {@link #Attention2D(Transport, ProcessorGrid, int, boolean, int)} on the first three channels of a block. */
    public Attention2D(Transport transport, Channels channels, ProcessorGrid grid, int length, boolean causal,
                  int window) {
        this.ctx = new Attention2DContext("Attention2D", transport, channels, grid, length, causal, window);
        this.mask = ctx.positions(ctx.rowQueries(), ctx.columnKeys());
    }

    private Attention2D(Attention2DContext ctx) {
        this.ctx = ctx;
        this.mask = ctx.positions(ctx.rowQueries(), ctx.columnKeys());
    }

    /** Attention within each document of the batch. */
    @Override
    public Attention2D withDocuments(Documents documents) {
        return new Attention2D(ctx.withDocuments(documents));
    }

    /** The grid this worker belongs to.
    public ProcessorGrid grid() {
        return ctx.grid;
    }

    /**
     * The forward pass (algorithm 1) on this worker's striped shards.
     *
     * @param q     local queries {@code [B, H, N/P, D]}
     * @param k     local keys {@code [B, Hkv, N/P, D]}
     * @param v     local values {@code [B, Hkv, N/P, D]}
     * @param scale score scale
     * @return this worker's rows of the result, and its transposed K/V for the backward pass
     * @throws IllegalArgumentException on inconsistent shapes or a shard that is not N/P long, before any send
     */
    @Override
    public Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        ctx.check(q, k, v);
        INDArray kv = ctx.transpose(k, v);
        INDArray kt = Attention2DContext.slice(kv, 0);
        INDArray vt = Attention2DContext.slice(kv, 1);
        INDArray qg = gather(ctx.rowComm, q);
        INDArray kg = gather(ctx.columnComm, kt);
        INDArray vg = gather(ctx.columnComm, vt);
        AttentionOutput part = flash.forward(qg, kg, vg, mask, scale);
        int c = ctx.grid.columns();
        List<INDArray[]> blocks = new ArrayList<>(c);
        for (int j = 0; j < c; j++) {
            blocks.add(new INDArray[] {Attention2DContext.rows(part.output(), j, c).dup('c'),
                Attention2DContext.rows(part.lse(), j, c).dup('c')});
        }
        INDArray[] mine = ctx.rowComm.reduceScatter(Reduction.attentionMerge(), blocks);
        return new Forward(new AttentionOutput(mine[0], mine[1]), kt, vt);
    }

    /**
     * The backward pass (algorithm 3) for this worker's {@code dO}, given its forward result.
     *
     * @return this worker's dQ, dK, dV in the shapes of its q, k, v shards
     * @throws IllegalArgumentException on inconsistent shapes, before any send
     */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward f, INDArray dO, double scale) {
        ctx.check(q, k, v);
        ctx.checkGradient(q, dO);
        INDArray qg = gather(ctx.rowComm, q);
        INDArray og = gather(ctx.rowComm, f.local().output());
        INDArray dog = gather(ctx.rowComm, dO);
        INDArray lseg = gather(ctx.rowComm, f.local().lse());
        INDArray kg = gather(ctx.columnComm, f.kt());
        INDArray vg = gather(ctx.columnComm, f.vt());
        AttentionGradients g = flash.backward(qg, kg, vg, og, lseg, dog, mask, scale);
        INDArray dq = reduceScatterRows(ctx.rowComm, g.dq());
        INDArray dkt = reduceScatterRows(ctx.columnComm, g.dk());
        INDArray dvt = reduceScatterRows(ctx.columnComm, g.dv());
        INDArray back = ctx.transposeBack(Nd4j.stack(0, dkt, dvt));
        return new AttentionGradients(dq, Attention2DContext.slice(back, 0), Attention2DContext.slice(back, 1));
    }

    /** The members' arrays concatenated along the sequence, in member order. */
    private static INDArray gather(Communicator comm, INDArray local) {
        return Nd4j.concat(2, comm.allGather(local.dup('c')).toArray(new INDArray[0]));
    }

    /** Sum over the members of each member's block of rows; returns this member's block. */
    private static INDArray reduceScatterRows(Communicator comm, INDArray full) {
        int parts = comm.group().size();
        List<INDArray[]> blocks = new ArrayList<>(parts);
        for (int j = 0; j < parts; j++) {
            blocks.add(new INDArray[] {Attention2DContext.rows(full, j, parts).dup('c')});
        }
        return comm.reduceScatter(Reduction.sum(), blocks)[0];
    }

    @Override
    public String toString() {
        return "Attention2D{" + ctx + "}";
    }
}
