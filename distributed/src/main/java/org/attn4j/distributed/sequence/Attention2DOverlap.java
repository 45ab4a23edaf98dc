package org.attn4j.distributed.sequence;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.CollectiveHandle;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMerge;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * ATTENTION2D with overlap (ATTENTION2D-O; Elango et al., ATTENTION2D, section 3.4, algorithms 4-6 forward and
 * appendix B, algorithms 8-11 backward) on an {@code R x C} {@link ProcessorGrid}. Grid, cyclic layout, K/V
 * transpose and bytes sent are those of {@link Attention2D}; what changes is that no collective runs on its own:
 * the gathers and reduce-scatters become rings inside a row or a column whose next hop is posted
 * ({@code sendRecvAsync}) before the flash call on the block at hand.
 * <pre>
 *   forward, seen from p(r, c) (the paper's figure 3); left/right = columns c-1/c+1, up/down = rows r-1/r+1
 *   A  post: own query block Q(r, c) to the left, Q(r, c+1) from the right                  (alg. 4, line 3)
 *   B  GTHRCMPT, column ring, s = 0 .. R-1: post K/V block KV(r+s, c) up, KV(r+s+1, c) from below;
 *      flash(Q(r, c), KV(r+s, c)) merged into (O1, LSE1)         -> K_g, V_g of column c are here (alg. 5)
 *   C  wait for Q(r, c+1)
 *   D  GTHRCMPTSTR, row ring, i = 1 .. C-1: post Q(r, c+i) left; flash(Q(r, c+i), K_g, V_g); merge with the
 *      partial result for p(r, c+i) that came from the right; post it left. The last one to arrive is
 *      this worker's, over the keys of every other column                                   (alg. 6)
 *   E  (O, LSE) = ATTNFIX((O1, LSE1), that partial)                                          (alg. 4, line 7)
 *
 *   backward: A with (Q, O, dO, LSE) packed as one block; B with flash backward, dQ summed, dK/dV kept per K/V
 *   block (alg. 9); D with flash backward and dQ partials travelling left (alg. 10); for the last query block
 *   the column reduce-scatter of dK/dV rides a column ring, one K/V block per step, own block last
 *   (CMPTSCTRBWD, alg. 11); then the inverse transpose (alg. 3, line 6)
 * </pre>
 * Only two query blocks are alive at a time (double buffering), so the gathered {@code Q_g} ({@code N/R} rows) is
 * never built; {@code K_g, V_g} ({@code N/C} rows) are, as in the paper. On a one-column grid ({@code R x 1})
 * there is no row ring and its own query block is the last one, so the dK/dV reduce-scatter rides the K/V
 * gather ring itself (the own block's gradient stays home, the others leave upwards as soon as they are made).
 * Partial results travel as one array: {@code O} and {@code LSE} side by side in the last dimension.
 *
 * <p>Not thread-safe; one instance per worker; every member makes the same calls in the same order.
 */
public final class Attention2DOverlap implements SequenceParallelAttention<Attention2D.Forward> {

    private final Attention2DContext ctx;
    private final int[] columnKeys;
    private final FlashAttention flash = FlashAttention.defaults();

    /** One query block with what its backward pass needs; travels packed as {@code [Q | O | dO | LSE]}. */
    private record QueryBlock(INDArray q, INDArray o, INDArray dO, INDArray lse, INDArray packed) {

        static QueryBlock of(INDArray q, INDArray o, INDArray dO, INDArray lse) {
            return new QueryBlock(q, o, dO, lse, pack(lse, q, o, dO));
        }

        static QueryBlock unpack(INDArray packed) {
            long d = (packed.size(3) - 1) / 3;
            return new QueryBlock(columns(packed, 0, d), columns(packed, d, 2 * d), columns(packed, 2 * d, 3 * d),
                    lastColumn(packed), packed);
        }
    }

    /**
     * ATTENTION2D-O on the most square grid of the transport's workers ({@link ProcessorGrid#forWorkers}).
     *
     * @param transport the job's transport; all its workers form the grid
     * @param length    the global sequence length N, a multiple of P
     * @param causal    causal masking by global position
     * @param window    sliding window width, 0 for none
     * @throws IllegalArgumentException if N is not a positive multiple of P
     */
    public Attention2DOverlap(Transport transport, int length, boolean causal, int window) {
        this(transport, ProcessorGrid.forWorkers(transport.worldSize()), length, causal, window);
    }

    /**
     * ATTENTION2D-O on an explicit grid.
     *
     * @param transport the job's transport
     * @param grid      {@code R x C} with {@code R C} equal to the transport's world size
     * @param length    the global sequence length N, a multiple of P
     * @param causal    causal masking by global position
     * @param window    sliding window width, 0 for none
     * @throws IllegalArgumentException if the grid does not have P processors or N is not a positive multiple of P
     */
    public Attention2DOverlap(Transport transport, ProcessorGrid grid, int length, boolean causal, int window) {
        this(transport, Channels.SEQUENCE, grid, length, causal, window);
    }

    /** As {@link #Attention2DOverlap(Transport, ProcessorGrid, int, boolean, int)} on the first three channels of a block. */
    public Attention2DOverlap(Transport transport, Channels channels, ProcessorGrid grid, int length, boolean causal,
                  int window) {
        this.ctx = new Attention2DContext("Attention2DOverlap", transport, channels, grid, length, causal, window);
        this.columnKeys = ctx.columnKeys();
    }

    private Attention2DOverlap(Attention2DContext ctx, int[] columnKeys) {
        this.ctx = ctx;
        this.columnKeys = columnKeys;
    }

    /** Attention within each document of the batch. */
    @Override
    public Attention2DOverlap withDocuments(Documents documents) {
        return new Attention2DOverlap(ctx.withDocuments(documents), columnKeys);
    }

    /** The grid this worker belongs to. */
    public ProcessorGrid grid() {
        return ctx.grid;
    }

    /**
     * The forward pass (algorithm 4) on this worker's striped shards.
     *
     * @param q     local queries {@code [B, H, N/P, D]}
     * @param k     local keys {@code [B, Hkv, N/P, D]}
     * @param v     local values {@code [B, Hkv, N/P, D]}
     * @param scale score scale
     * @return this worker's rows of the result, and its transposed K/V for the backward pass
     * @throws IllegalArgumentException on inconsistent shapes or a shard that is not N/P long, before any send
     */
    @Override
    public Attention2D.Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        ctx.check(q, k, v);
        INDArray kv = ctx.transpose(k, v);
        Communicator row = ctx.rowComm;
        boolean rowRing = ctx.grid.columns() > 1;
        CollectiveHandle<INDArray> nextQ = rowRing
                ? row.sendRecvAsync(row.group().previous(), q, row.group().next()) : null;
        INDArray[] kvBlocks = new INDArray[ctx.grid.rows()];
        AttentionOutput result = gatherCompute(q, kv, kvBlocks, scale);
        if (rowRing) {
            AttentionOutput others = gatherComputeScatter(nextQ.join(), concat(kvBlocks, 0), concat(kvBlocks, 1),
                    scale);
            result = AttentionMerge.merge(result, others);
        }
        return new Attention2D.Forward(result, Attention2DContext.slice(kv, 0), Attention2DContext.slice(kv, 1));
    }

    /**
     * GTHRCMPT (algorithm 5): the K/V blocks of this column travel up the column ring while this worker's own
     * query block attends to each; fills {@code kvBlocks} by owner row.
     *
     * @return the partial result of the own query block over the keys of this column
     */
    private AttentionOutput gatherCompute(INDArray q, INDArray kv, INDArray[] kvBlocks, double scale) {
        Communicator column = ctx.columnComm;
        int rows = kvBlocks.length;
        int[] queries = ctx.queryBlock(ctx.column);
        AttentionOutput acc = null;
        for (int s = 0; s < rows; s++) {
            int owner = (ctx.row + s) % rows;
            kvBlocks[owner] = kv;
            CollectiveHandle<INDArray> next = s < rows - 1
                    ? column.sendRecvAsync(column.group().previous(), kv, column.group().next()) : null;
            AttentionOutput part = flash.forward(q, Attention2DContext.slice(kv, 0), Attention2DContext.slice(kv, 1),
                    ctx.positions(queries, ctx.keyBlock(owner)), scale);
            acc = acc == null ? part : AttentionMerge.merge(acc, part);
            if (next != null) {
                kv = next.join();
            }
        }
        return acc;
    }

    /**
     * GTHRCMPTSTR (algorithm 6): the other query blocks of this row arrive one by one from the right and leave to
     * the left (two alive at a time); each attends to this column's keys, and its partial result joins the
     * partial travelling left towards its owner.
     *
     * @param qn the query block of {@code p(r, c+1)}
     * @return this worker's partial result over the keys of every other column
     */
    private AttentionOutput gatherComputeScatter(INDArray qn, INDArray kg, INDArray vg, double scale) {
        Communicator row = ctx.rowComm;
        int columns = ctx.grid.columns();
        CollectiveHandle<INDArray> partial = null;
        for (int i = 1; i < columns; i++) {
            int owner = (ctx.column + i) % columns;
            CollectiveHandle<INDArray> nextQ = i < columns - 1
                    ? row.sendRecvAsync(row.group().previous(), qn, row.group().next()) : null;
            AttentionOutput part = flash.forward(qn, kg, vg, ctx.positions(ctx.queryBlock(owner), columnKeys), scale);
            if (partial != null) {
                INDArray in = partial.join();
                part = AttentionMerge.merge(new AttentionOutput(columns(in, 0, in.size(3) - 1), lastColumn(in)), part);
            }
            partial = row.sendRecvAsync(row.group().previous(), pack(part.lse(), part.output()), row.group().next());
            if (nextQ != null) {
                qn = nextQ.join();
            }
        }
        INDArray mine = partial.join();
        return new AttentionOutput(columns(mine, 0, mine.size(3) - 1), lastColumn(mine));
    }

    /**
     * The backward pass (algorithm 8) for this worker's {@code dO}, given its forward result.
     *
     * @return this worker's dQ, dK, dV in the shapes of its q, k, v shards
     * @throws IllegalArgumentException on inconsistent shapes, before any send
     */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Attention2D.Forward f, INDArray dO,
                                       double scale) {
        ctx.check(q, k, v);
        ctx.checkGradient(q, dO);
        Communicator row = ctx.rowComm;
        boolean rowRing = ctx.grid.columns() > 1;
        QueryBlock own = QueryBlock.of(q, f.output(), dO, f.lse());
        CollectiveHandle<INDArray> nextQ = rowRing
                ? row.sendRecvAsync(row.group().previous(), own.packed(), row.group().next()) : null;
        int rows = ctx.grid.rows();
        INDArray[] kvBlocks = new INDArray[rows];
        INDArray[] dk = new INDArray[rows];
        INDArray[] dv = new INDArray[rows];
        INDArray[] first = gatherComputeBackward(own, Nd4j.stack(0, f.kt(), f.vt()), kvBlocks, dk, dv, !rowRing,
                scale);
        INDArray dq = first[0];
        INDArray dkv = first[1];
        if (rowRing) {
            INDArray[] rest = gatherComputeScatterBackward(QueryBlock.unpack(nextQ.join()), kvBlocks, dk, dv, scale);
            dq.addi(rest[0]);
            dkv = rest[1];
        }
        INDArray back = ctx.transposeBack(dkv);
        return new AttentionGradients(dq, Attention2DContext.slice(back, 0), Attention2DContext.slice(back, 1));
    }

    /**
     * GTHRCMPTBWD (algorithm 9): as {@link #gatherCompute}, with the flash backward; dQ of the own block is summed,
     * dK/dV are kept per K/V block in {@code dk}, {@code dv}. With {@code scatter} (a one-column grid, where the own
     * block is the only query block) the column reduce-scatter of algorithm 11 rides the same ring: the gradient
     * for the block of row {@code r+s} joins the partial coming from below and goes up, and the partial that
     * arrives last is this worker's.
     *
     * @return {@code {dQ, [dK_t; dV_t]}} with scatter, {@code {dQ, null}} without
     */
    private INDArray[] gatherComputeBackward(QueryBlock qb, INDArray kv, INDArray[] kvBlocks, INDArray[] dk,
                                             INDArray[] dv, boolean scatter, double scale) {
        Communicator column = ctx.columnComm;
        int rows = kvBlocks.length;
        int[] queries = ctx.queryBlock(ctx.column);
        INDArray dq = null;
        CollectiveHandle<INDArray> partial = null;
        for (int s = 0; s < rows; s++) {
            int owner = (ctx.row + s) % rows;
            kvBlocks[owner] = kv;
            CollectiveHandle<INDArray> next = s < rows - 1
                    ? column.sendRecvAsync(column.group().previous(), kv, column.group().next()) : null;
            AttentionGradients g = backward(qb, kv, queries, ctx.keyBlock(owner), scale);
            dq = dq == null ? g.dq() : dq.addi(g.dq());
            if (scatter && s > 0) {
                partial = passUp(Nd4j.stack(0, g.dk(), g.dv()), partial);
            } else {
                dk[owner] = g.dk();
                dv[owner] = g.dv();
            }
            if (next != null) {
                kv = next.join();
            }
        }
        if (!scatter) {
            return new INDArray[] {dq, null};
        }
        INDArray mine = Nd4j.stack(0, dk[ctx.row], dv[ctx.row]);
        return new INDArray[] {dq, partial == null ? mine : mine.addi(partial.join())};
    }

    /**
     * GTHRCMPTSTRBWD (algorithm 10): as {@link #gatherComputeScatter}, with the flash backward; dK/dV add up per
     * K/V block, dQ partials travel left towards their owners; the last query block goes through
     * {@link #computeScatterBackward}.
     *
     * @param qn the query block of {@code p(r, c+1)}
     * @return {@code {dQ of the own block over every other column, [dK_t; dV_t]}}
     */
    private INDArray[] gatherComputeScatterBackward(QueryBlock qn, INDArray[] kvBlocks, INDArray[] dk, INDArray[] dv,
                                                    double scale) {
        Communicator row = ctx.rowComm;
        int columns = ctx.grid.columns();
        int rows = kvBlocks.length;
        INDArray kg = concat(kvBlocks, 0);
        INDArray vg = concat(kvBlocks, 1);
        INDArray dkv = null;
        CollectiveHandle<INDArray> partial = null;
        for (int i = 1; i < columns; i++) {
            int owner = (ctx.column + i) % columns;
            CollectiveHandle<INDArray> nextQ = i < columns - 1
                    ? row.sendRecvAsync(row.group().previous(), qn.packed(), row.group().next()) : null;
            INDArray dq;
            if (i < columns - 1) {
                AttentionGradients g = flash.backward(qn.q(), kg, vg, qn.o(), qn.lse(), qn.dO(),
                        ctx.positions(ctx.queryBlock(owner), columnKeys), scale);
                dq = g.dq();
                for (int b = 0; b < rows; b++) {
                    dk[b].addi(Attention2DContext.rows(g.dk(), b, rows));
                    dv[b].addi(Attention2DContext.rows(g.dv(), b, rows));
                }
            } else {
                INDArray[] last = computeScatterBackward(qn, ctx.queryBlock(owner), kvBlocks, dk, dv, scale);
                dq = last[0];
                dkv = last[1];
            }
            if (partial != null) {
                dq.addi(partial.join());
            }
            partial = row.sendRecvAsync(row.group().previous(), dq, row.group().next());
            if (nextQ != null) {
                qn = QueryBlock.unpack(nextQ.join());
            }
        }
        return new INDArray[] {partial.join(), dkv};
    }

    /**
     * CMPTSCTRBWD (algorithm 11): the last query block against this column's K/V blocks one at a time, the blocks
     * of rows {@code r+1, ..., r+R-1} first, each gradient (plus what earlier query blocks left in {@code dk},
     * {@code dv}) joining the partial from below and going up; the own block last, while the final partial
     * arrives.
     *
     * @return {@code {dQ of the last query block, this worker's [dK_t; dV_t]}}
     */
    private INDArray[] computeScatterBackward(QueryBlock qn, int[] queries, INDArray[] kvBlocks, INDArray[] dk,
                                              INDArray[] dv, double scale) {
        int rows = kvBlocks.length;
        INDArray dq = null;
        INDArray mine = null;
        CollectiveHandle<INDArray> partial = null;
        for (int s = 1; s <= rows; s++) {
            int owner = (ctx.row + s) % rows;                 // s = rows: the own block
            AttentionGradients g = backward(qn, kvBlocks[owner], queries, ctx.keyBlock(owner), scale);
            dq = dq == null ? g.dq() : dq.addi(g.dq());
            INDArray grads = Nd4j.stack(0, g.dk().addi(dk[owner]), g.dv().addi(dv[owner]));
            if (s < rows) {
                partial = passUp(grads, partial);
            } else {
                mine = partial == null ? grads : grads.addi(partial.join());
            }
        }
        return new INDArray[] {dq, mine};
    }

    /** Adds the partial from below (if any) to {@code grads}, which are then posted up the column ring. */
    private CollectiveHandle<INDArray> passUp(INDArray grads, CollectiveHandle<INDArray> fromBelow) {
        if (fromBelow != null) {
            grads.addi(fromBelow.join());
        }
        Communicator column = ctx.columnComm;
        return column.sendRecvAsync(column.group().previous(), grads, column.group().next());
    }

    /** Flash backward of one query block against one stacked K/V block. */
    private AttentionGradients backward(QueryBlock qb, INDArray kv, int[] queries, int[] keys, double scale) {
        return flash.backward(qb.q(), Attention2DContext.slice(kv, 0), Attention2DContext.slice(kv, 1), qb.o(),
                qb.lse(), qb.dO(), ctx.positions(queries, keys), scale);
    }

    /** Slice {@code i} of the stacked K/V blocks, concatenated along the sequence in owner-row order. */
    private static INDArray concat(INDArray[] kvBlocks, int i) {
        INDArray[] parts = new INDArray[kvBlocks.length];
        for (int b = 0; b < parts.length; b++) {
            parts[b] = Attention2DContext.slice(kvBlocks[b], i);
        }
        return parts.length == 1 ? parts[0] : Nd4j.concat(2, parts);
    }

    /** {@code [blocks... | lse]} along the last dimension: {@code [B, H, n, m D + 1]}. */
    private static INDArray pack(INDArray lse, INDArray... blocks) {
        INDArray[] parts = new INDArray[blocks.length + 1];
        System.arraycopy(blocks, 0, parts, 0, blocks.length);
        parts[blocks.length] = lse.reshape(lse.size(0), lse.size(1), lse.size(2), 1);
        return Nd4j.concat(3, parts);
    }

    /** Columns {@code [from, to)} of the last dimension, as a new C-ordered array. */
    private static INDArray columns(INDArray packed, long from, long to) {
        return packed.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, to))
                .dup('c');
    }

    /** The last column of the last dimension (the LSE), {@code [B, H, n]}. */
    private static INDArray lastColumn(INDArray packed) {
        return packed.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                NDArrayIndex.point(packed.size(3) - 1)).dup('c');
    }

    @Override
    public String toString() {
        return "Attention2DOverlap{" + ctx + "}";
    }
}
