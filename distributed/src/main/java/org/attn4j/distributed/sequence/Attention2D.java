package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * ATTENTION2D without overlap (ATTENTION2D-NO; Elango et al., ATTENTION2D, section 3.2, algorithms 1-3) on a
 * square {@code g x g} grid, {@code P = g^2}. Worker {@code w = r + g c} is processor {@code p(r, c)} and holds
 * the cyclic 1D distribution of q, k, v: positions {@code w, w + P, w + 2P, ...} ({@link SequenceLayout#STRIPED}).
 * <pre>
 *   1  K_t, V_t = sendRecv with p(c, r)           column-major -> row-major: positions g r + c + i P
 *   2  Q_g = allGather(Q_p) over row r            the queries of row r, N/g of them
 *   3  K_g, V_g = allGather(K_t, V_t) over column c
 *   4  (O, LSE) = flash(Q_g, K_g, V_g)            a partial result over the keys of column c
 *   5  O_p, LSE_p = row reduce-scatter with ATTNFIX (the stable attention merge, algorithm 2)
 *   backward (algorithm 3): row all-gather Q, O, dO, LSE; column all-gather K_t, V_t; flash backward;
 *   dQ_p = row reduce-scatter (sum); dK_t, dV_t = column reduce-scatter (sum); sendRecv back with p(c, r)
 * </pre>
 * Every worker sends {@code O(N D / g)} per pass instead of ring attention's {@code O(N D)}. Masks follow global
 * positions, so the off-diagonal causal masks the cyclic layout produces come out of the same kernel.
 *
 * <p>Not thread-safe; one instance per worker; every member makes the same calls in the same order.
 */
public final class Attention2D implements SequenceParallelAttention<Attention2D.Forward> {

    private final int grid;
    private final int row;
    private final int column;
    private final Communicator world;
    private final Communicator rowComm;
    private final Communicator columnComm;
    private final int length;
    private final AttentionMask mask;
    private final FlashAttention flash = FlashAttention.defaults();
    private final int[] rowQueries;
    private final int[] columnKeys;

    /** What the backward pass needs. */
    public record Forward(AttentionOutput local, INDArray kt, INDArray vt) implements SequenceParallelAttention.Pass {
        @Override
        public INDArray output() {
            return local.output();
        }

        @Override
        public INDArray lse() {
            return local.lse();
        }
    }

    /**
     * @param transport the job's transport; all {@code worldSize = g^2} ranks form the grid
     * @param length    the global sequence length N, a multiple of P
     * @param causal    causal masking by global position
     * @param window    sliding window width, 0 for none
     * @throws IllegalArgumentException if the world size is not a square or N not a multiple of it
     */
    public Attention2D(Transport transport, int length, boolean causal, int window) {
        int p = transport.worldSize();
        this.grid = (int) Math.round(Math.sqrt(p));
        if (grid * grid != p) {
            throw new IllegalArgumentException("Attention2D: " + p + " workers; the square grid needs a square number"
                    + " (1, 4, 9, ...)");
        }
        int w = transport.rank();
        this.row = w % grid;
        this.column = w / grid;
        this.length = length;
        this.world = Communicator.of(transport, Group.world(transport), 3);
        int[] rowRanks = new int[grid];
        int[] columnRanks = new int[grid];
        for (int i = 0; i < grid; i++) {
            rowRanks[i] = row + grid * i;              // p(r, i)
            columnRanks[i] = columnMajor(i, column);  // p(i, c) holds, after the transpose, the keys g i + c + j P
        }
        this.rowComm = Communicator.of(transport, Group.of(transport, rowRanks), 1);
        this.columnComm = Communicator.of(transport, Group.of(transport, columnRanks), 2);
        int[] q = new int[0];
        int[] k = new int[0];
        for (int i = 0; i < grid; i++) {
            q = concat(q, SequenceLayout.STRIPED.positions(row + grid * i, p, length));
            k = concat(k, SequenceLayout.STRIPED.positions(grid * i + column, p, length));
        }
        this.rowQueries = q;
        this.columnKeys = k;
        this.mask = AttentionMask.builder().causal(causal).window(window).queryPositions(rowQueries)
                .keyPositions(columnKeys).build();
    }

    /** The forward pass on this worker's striped shards {@code [B, H, N/P, D]}, {@code [B, Hkv, N/P, D]}. */
    @Override
    public Forward forward(INDArray q, INDArray k, INDArray v, double scale) {
        int transposed = columnMajor(column, row);
        INDArray kv = world.sendRecv(transposed, Nd4j.stack(0, k, v), transposed);
        INDArray kt = kv.get(NDArrayIndex.point(0), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                NDArrayIndex.all()).dup('c');
        INDArray vt = kv.get(NDArrayIndex.point(1), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                NDArrayIndex.all()).dup('c');
        INDArray qg = gather(rowComm, q);
        INDArray kg = gather(columnComm, kt);
        INDArray vg = gather(columnComm, vt);
        AttentionOutput part = flash.forward(qg, kg, vg, mask, scale);
        List<INDArray[]> blocks = new ArrayList<>();
        for (int j = 0; j < grid; j++) {
            blocks.add(new INDArray[] {rows(part.output(), j), rows(part.lse(), j)});
        }
        INDArray[] mine = rowComm.reduceScatter(Reduction.attentionMerge(), blocks);
        return new Forward(new AttentionOutput(mine[0], mine[1]), kt, vt);
    }

    /** The backward pass for this worker's {@code dO}, given its forward result. */
    @Override
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward f, INDArray dO, double scale) {
        INDArray qg = gather(rowComm, q);
        INDArray og = gather(rowComm, f.local().output());
        INDArray dog = gather(rowComm, dO);
        INDArray lseg = gather(rowComm, f.local().lse());
        INDArray kg = gather(columnComm, f.kt());
        INDArray vg = gather(columnComm, f.vt());
        AttentionGradients g = flash.backward(qg, kg, vg, og, lseg, dog, mask, scale);
        INDArray dq = reduceScatterRows(rowComm, g.dq());
        INDArray dkt = reduceScatterRows(columnComm, g.dk());
        INDArray dvt = reduceScatterRows(columnComm, g.dv());
        int transposed = columnMajor(column, row);
        INDArray back = world.sendRecv(transposed, Nd4j.stack(0, dkt, dvt), transposed);
        return new AttentionGradients(dq,
                back.get(NDArrayIndex.point(0), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                        NDArrayIndex.all()).dup('c'),
                back.get(NDArrayIndex.point(1), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                        NDArrayIndex.all()).dup('c'));
    }

    /** Worker index of grid processor {@code p(r, c)} in the column-major numbering. */
    private int columnMajor(int r, int c) {
        return r + grid * c;
    }

    /** The members' arrays concatenated along the sequence, in member order. */
    private static INDArray gather(Communicator comm, INDArray local) {
        return Nd4j.concat(2, comm.allGather(local.dup('c')).toArray(new INDArray[0]));
    }

    /** Sum over the members of each member's block of rows; returns this member's block. */
    private INDArray reduceScatterRows(Communicator comm, INDArray full) {
        List<INDArray[]> blocks = new ArrayList<>();
        for (int j = 0; j < grid; j++) {
            blocks.add(new INDArray[] {rows(full, j)});
        }
        return comm.reduceScatter(Reduction.sum(), blocks)[0];
    }

    /** Block {@code j} of {@code grid} equal blocks along dimension 2 (the sequence), as a new array. */
    private INDArray rows(INDArray a, int j) {
        long n = a.size(2) / grid;
        INDArrayIndex[] idx = new INDArrayIndex[a.rank()];
        for (int d = 0; d < a.rank(); d++) {
            idx[d] = d == 2 ? NDArrayIndex.interval(j * n, (j + 1) * n) : NDArrayIndex.all();
        }
        return a.get(idx).dup('c');
    }

    private static int[] concat(int[] a, int[] b) {
        int[] c = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    @Override
    public String toString() {
        return "Attention2D{grid " + grid + "x" + grid + ", p(" + row + ", " + column + "), N=" + length + "}";
    }
}
