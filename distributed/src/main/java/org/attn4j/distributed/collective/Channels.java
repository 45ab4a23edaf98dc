package org.attn4j.distributed.collective;

import org.attn4j.distributed.transport.Transport;

/**
 * A block of consecutive collective channels ({@link CollectiveTags}), and every block a job uses, declared here
 * and nowhere else. Two communicators need different channels when they may have calls in flight at the same
 * time over a common pair of ranks; each user of collectives takes its channels from its block by index.
 * <pre>
 *   channels   user
 *   0 .. 7     the sequence-parallel algorithm of a group (its descriptor says how many it takes); channel 0 is
 *              also {@link Communicator#world}'s, for a job's barriers between calls of the algorithm
 *   8 .. 15    a trainer's linear attention layers (LASP) beside the group's softmax algorithm
 *   16         the trainer's own collectives (gradients, ZeRO partitions, losses)
 *   17         a decoder's merges of partial attention and its broadcasts
 * </pre>
 *
 * @param first the block's first channel
 * @param count how many channels it holds
 */
public record Channels(int first, int count) {

    /** The sequence-parallel algorithm of a group. */
    public static final Channels SEQUENCE = new Channels(0, 8);
    /** A trainer's linear attention layers, which run beside the group's softmax algorithm. */
    public static final Channels LINEAR_LAYERS = new Channels(8, 8);
    /** The trainer's own collectives. */
    public static final Channels TRAINER = new Channels(16, 1);
    /** A decoder's merges of the workers' partial attention. */
    public static final Channels DECODING = new Channels(17, 1);

    /**
     * @throws IllegalArgumentException if the block is empty or leaves the channel space
     */
    public Channels {
        if (count < 1 || first < 0 || (long) first + count > CollectiveTags.CHANNELS) {
            throw new IllegalArgumentException("Channels: a block of " + count + " from " + first + " must lie in [0, "
                    + CollectiveTags.CHANNELS + ")");
        }
    }

    /** Channel {@code i} of the block. */
    public int get(int i) {
        if (i < 0 || i >= count) {
            throw new IllegalArgumentException("Channels: index " + i + " outside a block of " + count + " channels");
        }
        return first + i;
    }

    /**
     * The first {@code n} channels of this block.
     *
     * @throws IllegalArgumentException if the block holds fewer
     */
    public Channels take(int n) {
        if (n > count) {
            throw new IllegalArgumentException("Channels: " + n + " channels asked of a block of " + count);
        }
        return new Channels(first, n);
    }

    /** A communicator over all ranks of the transport on channel {@code i} of the block. */
    public Communicator world(Transport transport, int i) {
        return Communicator.of(transport, Group.world(transport), get(i));
    }
}
