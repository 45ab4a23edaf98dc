package org.attn4j.distributed.collective;

import java.util.Arrays;

import org.attn4j.distributed.transport.Transport;

/**
 * An ordered subset of the job's ranks that runs collectives together (the world, a row or a column of a grid,
 * a team), seen from one member: its ranks in group order and this rank's index among them. Ring collectives
 * pass data from index {@code i} to index {@code i + 1 mod size}.
 *
 * <pre>
 *   world ranks 0 1 2 3 as a 2 x 2 grid:   rows    {0, 1}  {2, 3}
 *       0  1                               columns {0, 2}  {1, 3}
 *       2  3                               rank 3 in column {1, 3}: index 1, next = prev = index 0 (rank 1)
 * </pre>
 *
 * Immutable.
 */
public final class Group {

    private final int[] ranks;
    private final int index;
    private final int worldSize;

    private Group(int worldSize, int rank, int[] ranks) {
        if (worldSize < 1) {
            throw new IllegalArgumentException("Group: world size must be >= 1, got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("Group: rank must be in [0, " + worldSize + "), got " + rank);
        }
        if (ranks.length == 0) {
            throw new IllegalArgumentException("Group: needs at least one rank, got none");
        }
        boolean[] seen = new boolean[worldSize];
        int found = -1;
        for (int i = 0; i < ranks.length; i++) {
            int r = ranks[i];
            if (r < 0 || r >= worldSize) {
                throw new IllegalArgumentException("Group " + Arrays.toString(ranks) + ": rank " + r
                        + " is outside the world [0, " + worldSize + ")");
            }
            if (seen[r]) {
                throw new IllegalArgumentException("Group " + Arrays.toString(ranks) + ": rank " + r
                        + " is listed twice; ranks must be distinct");
            }
            seen[r] = true;
            if (r == rank) {
                found = i;
            }
        }
        if (found < 0) {
            throw new IllegalArgumentException("Group " + Arrays.toString(ranks) + ": this rank " + rank
                    + " is not a member; every member builds the group it belongs to");
        }
        this.ranks = ranks.clone();
        this.index = found;
        this.worldSize = worldSize;
    }

    /** All ranks of the transport's job, in rank order. */
    public static Group world(Transport transport) {
        int[] all = new int[transport.worldSize()];
        Arrays.setAll(all, i -> i);
        return new Group(transport.worldSize(), transport.rank(), all);
    }

    /**
     * The group of {@code ranks} (in this order) as seen by the transport's rank.
     *
     * @throws IllegalArgumentException if the ranks are empty, repeat, leave the world or omit this rank
     */
    public static Group of(Transport transport, int... ranks) {
        return new Group(transport.worldSize(), transport.rank(), ranks);
    }

    /**
     * The group of {@code ranks} (in this order) as seen by {@code rank} in a job of {@code worldSize} ranks.
     *
     * @throws IllegalArgumentException if the ranks are empty, repeat, leave the world or omit {@code rank}
     */
    public static Group of(int worldSize, int rank, int... ranks) {
        return new Group(worldSize, rank, ranks);
    }

    /** Number of members. */
    public int size() {
        return ranks.length;
    }

    /** This rank's index in the group, {@code 0 <= index < size}. */
    public int index() {
        return index;
    }

    /** The world rank of the member at {@code index}. */
    public int rank(int index) {
        checkIndex(index, "index");
        return ranks[index];
    }

    /** The world ranks in group order (a copy). */
    public int[] ranks() {
        return ranks.clone();
    }

    /** The index of the next member on the ring, {@code (index + 1) mod size}. */
    public int next() {
        return (index + 1) % ranks.length;
    }

    /** The index of the previous member on the ring, {@code (index - 1) mod size}. */
    public int previous() {
        return (index + ranks.length - 1) % ranks.length;
    }

    /** The size of the job the ranks belong to. */
    public int worldSize() {
        return worldSize;
    }

    /** Checks {@code 0 <= index < size}, naming {@code what} in the message. */
    void checkIndex(int index, String what) {
        if (index < 0 || index >= ranks.length) {
            throw new IllegalArgumentException(this + ": " + what + " must be a member index in [0, " + ranks.length
                    + "), got " + index);
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Group g && g.index == index && g.worldSize == worldSize && Arrays.equals(g.ranks, ranks);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(ranks) * 31 + index;
    }

    /** E.g. "group [2, 3] (rank 3 at index 1)". */
    @Override
    public String toString() {
        return "group " + Arrays.toString(ranks) + " (rank " + ranks[index] + " at index " + index + ")";
    }
}
