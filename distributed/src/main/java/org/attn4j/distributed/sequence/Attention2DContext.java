package org.attn4j.distributed.sequence;

import java.util.Arrays;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * One worker's place on an ATTENTION2D {@link ProcessorGrid}, validated once and shared by {@link Attention2D}
 * and {@link Attention2DOverlap}: its row and column, the communicators of its row (members by column), its
 * column (members by row) and the world (for the K/V transpose), and the global positions of every query and key
 * block it meets, from which the masks are built.
 */
final class Attention2DContext {

    final ProcessorGrid grid;
    final int row;
    final int column;
    final Communicator world;
    final Communicator rowComm;
    final Communicator columnComm;
    final int length;
    final AttentionMask mask;
    private final String op;
    private final int worker;
    private final int[] local;
    private final int[][] queryBlocks;
    private final int[][] keyBlocks;

    /**
     * @throws IllegalArgumentException if the grid does not hold exactly the transport's workers, or N is not a
     *                                  positive multiple of P
     */
    Attention2DContext(String op, Transport transport, Channels channels, ProcessorGrid grid, int length,
                       boolean causal, int window) {
        int p = transport.worldSize();
        if (grid == null || grid.size() != p) {
            throw new IllegalArgumentException(op + ": grid " + grid + " has " + (grid == null ? 0 : grid.size())
                    + " processors; the transport has " + p + " workers");
        }
        if (length < p || length % p != 0) {
            throw new IllegalArgumentException(op + ": sequence length " + length + " must be a positive multiple"
                    + " of the " + p + " workers (cyclic layout, grid " + grid + ")");
        }
        if (window < 0) {
            throw new IllegalArgumentException(op + ": window must be >= 0 (0 = none), got " + window);
        }
        this.op = op;
        this.grid = grid;
        this.length = length;
        this.worker = transport.rank();
        this.row = grid.row(worker);
        this.column = grid.column(worker);
        this.mask = AttentionMask.builder().causal(causal).window(window).build();
        int[] rowRanks = new int[grid.columns()];
        this.queryBlocks = new int[grid.columns()][];
        for (int j = 0; j < grid.columns(); j++) {
            rowRanks[j] = grid.worker(row, j);
            queryBlocks[j] = SequenceLayout.STRIPED.positions(rowRanks[j], p, length);
        }
        int[] columnRanks = new int[grid.rows()];
        this.keyBlocks = new int[grid.rows()][];
        for (int i = 0; i < grid.rows(); i++) {
            columnRanks[i] = grid.worker(i, column);
            keyBlocks[i] = SequenceLayout.STRIPED.positions(grid.keyShard(i, column), p, length);
        }
        this.local = SequenceLayout.STRIPED.positions(worker, p, length);
        // Rows share no pair of ranks with each other, nor with a column; the world shares pairs with both.
        this.world = channels.world(transport, 0);
        this.rowComm = Communicator.of(transport, Group.of(transport, rowRanks), channels.get(1));
        this.columnComm = Communicator.of(transport, Group.of(transport, columnRanks), channels.get(2));
    }

    private Attention2DContext(Attention2DContext base, AttentionMask mask) {
        this.op = base.op;
        this.grid = base.grid;
        this.length = base.length;
        this.worker = base.worker;
        this.row = base.row;
        this.column = base.column;
        this.mask = mask;
        this.queryBlocks = base.queryBlocks;
        this.keyBlocks = base.keyBlocks;
        this.local = base.local;
        this.world = base.world;
        this.rowComm = base.rowComm;
        this.columnComm = base.columnComm;
    }

    /** This context for a batch of packed sequences ({@code null}: one document each). */
    Attention2DContext withDocuments(Documents documents) {
        return new Attention2DContext(this, mask.withDocuments(BlockMasks.checkDocuments(op, documents, length)));
    }

    /**
     * Checks this worker's shards before anything is sent: shapes, types, heads and the shard length N/P.
     *
     * @throws IllegalArgumentException naming the op and the offending value
     */
    void check(INDArray q, INDArray k, INDArray v) {
        AttentionShapes.of(op, q, k, v, positions(local, local));       // documents' batch size included
    }

    /**
     * Checks that {@code dO} matches the queries, before anything is sent.
     *
     * @throws IllegalArgumentException naming the op, the expected and the actual shape
     */
    void checkGradient(INDArray q, INDArray dO) {
        if (dO == null || !Arrays.equals(dO.shape(), q.shape()) || dO.dataType() != q.dataType()) {
            throw new IllegalArgumentException(op + ": dO must be " + q.dataType() + " " + Arrays.toString(q.shape())
                    + " like q, got " + (dO == null ? "null" : dO.dataType() + " " + Arrays.toString(dO.shape())));
        }
    }

    /** Positions of the query block of row member {@code j}: the shard of {@code p(row, j)}. */
    int[] queryBlock(int j) {
        return queryBlocks[j];
    }

    /** Positions of the key block of column member {@code i}: the transposed shard of {@code p(i, column)}. */
    int[] keyBlock(int i) {
        return keyBlocks[i];
    }

    /** The queries of this row, row members' blocks in member order ({@code Q_g(r)}, N/R positions). */
    int[] rowQueries() {
        return concat(queryBlocks);
    }

    /** The keys of this column, column members' blocks in member order ({@code K_g(c)}, N/C positions). */
    int[] columnKeys() {
        return concat(keyBlocks);
    }

    /** The mask for these query and key positions. */
    AttentionMask positions(int[] queries, int[] keys) {
        return mask.toBuilder().queryPositions(queries).keyPositions(keys).build();
    }

    /**
     * Algorithm 1, line 1, generalised: sends this worker's K/V shard to the processor that needs it in the
     * row-major distribution and receives the shard this processor needs ({@link ProcessorGrid#keyShard}).
     *
     * @return {@code [K_t; V_t]} stacked along a new dimension 0
     */
    INDArray transpose(INDArray k, INDArray v) {
        return world.sendRecv(grid.keyHolder(worker), Nd4j.stack(0, k, v), grid.keyShard(row, column));
    }

    /** Algorithm 3, line 6: the inverse permutation, for {@code [dK_t; dV_t]}. */
    INDArray transposeBack(INDArray dkv) {
        return world.sendRecv(grid.keyShard(row, column), dkv, grid.keyHolder(worker));
    }

    /** Slice {@code i} of an array stacked along dimension 0, as a new C-ordered array. */
    static INDArray slice(INDArray stacked, int i) {
        INDArrayIndex[] idx = new INDArrayIndex[stacked.rank()];
        Arrays.fill(idx, NDArrayIndex.all());
        idx[0] = NDArrayIndex.point(i);
        return stacked.get(idx).dup('c');
    }

    /** Block {@code j} of {@code parts} equal blocks along dimension 2 (the sequence), as a view. */
    static INDArray rows(INDArray a, int j, int parts) {
        long n = a.size(2) / parts;
        INDArrayIndex[] idx = new INDArrayIndex[a.rank()];
        Arrays.fill(idx, NDArrayIndex.all());
        idx[2] = NDArrayIndex.interval(j * n, (j + 1) * n);
        return a.get(idx);
    }

    private static int[] concat(int[][] blocks) {
        int n = 0;
        for (int[] b : blocks) {
            n += b.length;
        }
        int[] all = new int[n];
        int at = 0;
        for (int[] b : blocks) {
            System.arraycopy(b, 0, all, at, b.length);
            at += b.length;
        }
        return all;
    }

    @Override
    public String toString() {
        return "grid " + grid + ", p(" + row + ", " + column + "), N=" + length;
    }
}
