package org.attn4j.distributed.training;

import org.attn4j.distributed.collective.Communicator;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * A flat vector (the network's parameters) cut into W near-equal slices, rank {@code r} owning
 * {@code [r P / W, (r+1) P / W)}: gathering parts of it from their owners, and handing the resident pages of what
 * this rank does not own back to the operating system ({@link ResidentPages}). Every rank calls the collective
 * methods in the same order with the same ranges.
 */
final class ShardedParameters {

    private final INDArray flat;
    private final long length;
    private final Communicator world;
    private final int ranks;
    private final int rank;

    /**
     * @param flat  the vector, contiguous (the network's parameters)
     * @param world the communicator of all W ranks
     */
    ShardedParameters(INDArray flat, Communicator world) {
        this.flat = flat.reshape(flat.length());
        this.length = flat.length();
        this.world = world;
        this.ranks = world.group().size();
        this.rank = world.group().index();
    }

    /** First index of rank {@code r}'s slice ({@code r = W}: the length). */
    long start(int r) {
        return r * length / ranks;
    }

    /** Rank {@code r}'s slice of a vector of this length (a view). */
    INDArray slice(INDArray vector, int r) {
        return vector.reshape(length).get(NDArrayIndex.interval(start(r), start(r + 1)));
    }

    /**
     * Every rank's slice gathered into the vector: a ring in W - 1 steps, each passing on the slice received in
     * the step before, so that only one received slice is held at a time (a plain all-gather would hold all
     * W - 1 before copying them in). Volume: the other slices, per rank.
     * <pre>
     *   step s = 1 .. W-1: rank r sends slice r-s+1 to r+1 and receives slice r-s from r-1
     * </pre>
     */
    void gatherAll() {
        for (int s = 1; s < ranks; s++) {
            int send = Math.floorMod(rank - s + 1, ranks);
            int receive = Math.floorMod(rank - s, ranks);
            INDArray got = world.sendRecv((rank + 1) % ranks, slice(flat, send), (rank - 1 + ranks) % ranks);
            slice(flat, receive).assign(got.reshape(start(receive + 1) - start(receive)));
            got.close();
        }
    }

    /**
     * Elements {@code [from, to)} gathered from their owners: each owner of a part broadcasts it. Volume: the
     * range's bytes, less this rank's own part.
     */
    void gather(long from, long to) {
        for (int r = 0; r < ranks; r++) {
            long lo = Math.max(from, start(r));
            long hi = Math.min(to, start(r + 1));
            if (lo >= hi) {
                continue;
            }
            INDArray part = flat.get(NDArrayIndex.interval(lo, hi));
            INDArray got = world.broadcast(r, r == rank ? part : null);
            if (r != rank) {
                part.assign(got.reshape(hi - lo));
                got.close();
            }
        }
    }

    /** Releases the resident pages of elements {@code [from, to)} outside this rank's slice. */
    void release(long from, long to) {
        ResidentPages.release(flat, from, Math.min(to, start(rank)));
        ResidentPages.release(flat, Math.max(from, start(rank + 1)), to);
    }

    /** The range of the vector a view of it covers, {@code [from, to)}. */
    long[] rangeOf(INDArray view) {
        long width = flat.dataType().width();
        long offset = (view.data().addressPointer().address() - flat.data().addressPointer().address()) / width;
        if (offset < 0 || offset + view.length() > length || view.elementWiseStride() != 1) {
            throw new IllegalArgumentException("ShardedParameters: the array is not a contiguous view of the "
                    + "parameter vector (offset " + offset + ", length " + view.length() + " of " + length + ")");
        }
        return new long[] {offset, offset + view.length()};
    }
}
