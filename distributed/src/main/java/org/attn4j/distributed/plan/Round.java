package org.attn4j.distributed.plan;

import java.util.Arrays;
import java.util.List;
import java.util.function.IntUnaryOperator;

/**
 * Messages posted at the same time, which share links and network adapters (see {@link Network}). A round is
 * one or more flows; in a flow every rank sends at most one message, all of the same size.
 *
 * @param flows the concurrent flows
 */
public record Round(List<Flow> flows) {

    /** No rank sends: a flow target. */
    public static final int NONE = -1;

    /**
     * One message per rank: rank {@code r} sends {@code bytes} to {@code to[r]} (or nothing when it is
     * {@link #NONE} or {@code r} itself, which the transport does not count either).
     */
    public record Flow(int[] to, long bytes) {

        /** Every rank {@code r} sends to {@code target(r)}. */
        public static Flow of(int p, long bytes, IntUnaryOperator target) {
            int[] to = new int[p];
            for (int r = 0; r < p; r++) {
                to[r] = target.applyAsInt(r);
            }
            return new Flow(to, bytes);
        }

        /** Whether rank {@code r} puts a message on the wire. */
        boolean sends(int r) {
            return to[r] != NONE && to[r] != r;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Flow f && f.bytes == bytes && Arrays.equals(f.to, to);
        }

        @Override
        public int hashCode() {
            return 31 * Arrays.hashCode(to) + Long.hashCode(bytes);
        }

        @Override
        public String toString() {
            return "Flow{" + bytes + " B, to " + Arrays.toString(to) + "}";
        }
    }

    /** A round of the given flows. */
    public static Round of(Flow... flows) {
        return new Round(List.of(flows));
    }

    /** A round of one flow: every rank {@code r} sends {@code bytes} to {@code target(r)}. */
    public static Round of(int p, long bytes, IntUnaryOperator target) {
        return of(Flow.of(p, bytes, target));
    }
}
