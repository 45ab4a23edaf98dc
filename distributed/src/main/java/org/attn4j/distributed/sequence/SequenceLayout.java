package org.attn4j.distributed.sequence;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Which global token positions each of {@code P} workers holds of a sequence of length {@code N}. Masks are
 * defined by global position (DESIGN.md), so a layout only changes the positions handed to the kernel.
 * <pre>
 *   N = 8, P = 2         worker 0          worker 1
 *   CONTIGUOUS           0 1 2 3           4 5 6 7
 *   ZIGZAG (2P chunks)   0 1 | 6 7         2 3 | 4 5       chunk r and 2P-1-r: even causal work
 *   STRIPED              0 2 4 6           1 3 5 7         position i on worker i mod P
 * </pre>
 * ZIGZAG is WallFacer's data loader for causal load balance (WallFacer section 4); STRIPED balances causal
 * work too, at the cost of partial tiles everywhere.
 */
public enum SequenceLayout {

    /** Worker r holds positions {@code [r N/P, (r+1) N/P)}. */
    CONTIGUOUS,
    /** Worker r holds chunks r and 2P-1-r of 2P equal chunks. */
    ZIGZAG,
    /** Worker r holds positions r, r+P, r+2P, ... */
    STRIPED;

    /**
     * Every worker's positions, worker after worker: the global position of each row of the shards concatenated
     * in worker order (what an all-gather or all-to-all over the sequence leaves).
     */
    public int[] gathered(int workers, int n) {
        int[] all = new int[n];
        int local = n / workers;
        for (int w = 0; w < workers; w++) {
            System.arraycopy(positions(w, workers, n), 0, all, w * local, local);
        }
        return all;
    }

    /**
     * The global positions worker {@code worker} of {@code workers} holds, in the order it holds them.
     *
     * @throws IllegalArgumentException if N does not split evenly (P for contiguous and striped, 2P for zigzag)
     */
    public int[] positions(int worker, int workers, int n) {
        check(worker, workers, n);
        int local = n / workers;
        int[] p = new int[local];
        switch (this) {
            case CONTIGUOUS -> {
                for (int i = 0; i < local; i++) {
                    p[i] = worker * local + i;
                }
            }
            case ZIGZAG -> {
                int chunk = n / (2 * workers);
                for (int i = 0; i < chunk; i++) {
                    p[i] = worker * chunk + i;
                    p[chunk + i] = (2 * workers - 1 - worker) * chunk + i;
                }
            }
            case STRIPED -> {
                for (int i = 0; i < local; i++) {
                    p[i] = worker + i * workers;
                }
            }
            default -> throw new IllegalStateException(name());
        }
        return p;
    }

    /** This worker's shard of a full {@code [B, H, N, D]} array (a copy), positions in {@link #positions} order. */
    public INDArray shard(INDArray full, int worker, int workers) {
        int[] pos = positions(worker, workers, (int) full.size(2));
        INDArray out = Nd4j.create(full.dataType(), full.size(0), full.size(1), pos.length, full.size(3));
        for (int i = 0; i < pos.length; i++) {
            out.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.point(i), NDArrayIndex.all())
                    .assign(full.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.point(pos[i]),
                            NDArrayIndex.all()));
        }
        return out;
    }

    /** Puts every worker's shard back into one {@code [B, H, N, ...]} array (inverse of {@link #shard}). */
    public INDArray unshard(INDArray[] shards) {
        int workers = shards.length;
        long[] shape = shards[0].shape().clone();
        shape[2] = shape[2] * workers;
        INDArray full = Nd4j.create(shards[0].dataType(), shape);
        for (int w = 0; w < workers; w++) {
            int[] pos = positions(w, workers, (int) shape[2]);
            for (int i = 0; i < pos.length; i++) {
                full.get(index(shape.length, pos[i])).assign(shards[w].get(index(shape.length, i)));
            }
        }
        return full;
    }

    private static org.nd4j.linalg.indexing.INDArrayIndex[] index(int rank, int position) {
        org.nd4j.linalg.indexing.INDArrayIndex[] idx = new org.nd4j.linalg.indexing.INDArrayIndex[rank];
        for (int d = 0; d < rank; d++) {
            idx[d] = d == 2 ? NDArrayIndex.point(position) : NDArrayIndex.all();
        }
        return idx;
    }

    private void check(int worker, int workers, int n) {
        if (workers < 1 || worker < 0 || worker >= workers) {
            throw new IllegalArgumentException("SequenceLayout: worker " + worker + " of " + workers
                    + "; expected 0 <= worker < workers");
        }
        int parts = this == ZIGZAG ? 2 * workers : workers;
        if (n < parts || n % parts != 0) {
            throw new IllegalArgumentException("SequenceLayout." + name() + ": sequence length " + n
                    + " must be a positive multiple of " + parts + " for " + workers + " workers");
        }
    }
}
