package org.attn4j.distributed.plan;

import java.util.ArrayList;
import java.util.List;

/**
 * One pass (forward or backward) of an algorithm as the steps every rank takes in lock step: compute, rounds
 * of messages, or a compute overlapped with rounds (double buffering: a step lasts
 * {@code max(compute, rounds)}). All ranks compute the same amount (the layouts balance the causal work).
 * The bytes and messages per rank are read off the same steps the time is, so they cannot drift apart.
 */
public final class Schedule {

    /**
     * @param compute    seconds of local compute
     * @param rounds     rounds of messages, one after another
     * @param overlapped whether the rounds run during the compute (else after it)
     * @param repeat     how many times the step is taken in a row
     */
    record Step(double compute, List<Round> rounds, boolean overlapped, long repeat) {
    }

    private final int workers;
    private final List<Step> steps = new ArrayList<>();

    public Schedule(int workers) {
        this.workers = workers;
    }

    /** Rounds one after another with nothing to hide behind. */
    public Schedule comm(Round... rounds) {
        return add(new Step(0, List.of(rounds), false, 1));
    }

    /** The same round {@code times} times in a row (the steps of a ring collective). */
    public Schedule comm(long times, Round round) {
        return add(new Step(0, List.of(round), false, times));
    }

    /** Local compute only. */
    public Schedule compute(double seconds) {
        return add(new Step(seconds, List.of(), false, 1));
    }

    /** {@code times} steps, each computing for {@code seconds} while its rounds are in flight. */
    public Schedule overlapped(long times, double seconds, Round... rounds) {
        return add(new Step(seconds, List.of(rounds), true, times));
    }

    /**
     * {@code steps} ring steps of {@code seconds} compute each, pipelined: {@code ahead} (the block the next step
     * works on) is in flight during every step but the last; {@code behind} (the accumulator the step before
     * produced, passed on) during every step but the first; {@code home} (the last accumulator, on its way to its
     * owner) after the last compute. {@code behind} and {@code home} may be null (nothing of the kind).
     */
    public Schedule ring(int steps, double seconds, Round.Flow ahead, Round.Flow behind, Round.Flow home) {
        if (steps > 1) {
            overlapped(1, seconds, Round.of(ahead));
            overlapped(steps - 2, seconds, behind == null ? Round.of(ahead) : Round.of(ahead, behind));
            if (behind == null) {
                compute(seconds);
            } else {
                overlapped(1, seconds, Round.of(behind));
            }
        } else {
            compute(seconds);
        }
        return home == null ? this : comm(Round.of(home));
    }

    private Schedule add(Step step) {
        if (step.repeat() > 0) {
            steps.add(step);
        }
        return this;
    }

    /** Predicted seconds of the pass on this network. */
    public double seconds(Network network) {
        double total = 0;
        for (Step s : steps) {
            double comm = 0;
            for (Round r : s.rounds()) {
                comm += network.seconds(r);
            }
            total += s.repeat() * (s.overlapped() ? Math.max(s.compute(), comm) : s.compute() + comm);
        }
        return total;
    }

    /** Seconds of local compute in the pass (the part no network can remove). */
    public double computeSeconds() {
        double total = 0;
        for (Step s : steps) {
            total += s.repeat() * s.compute();
        }
        return total;
    }

    /** Bytes each rank puts on the wire in the pass (sends to itself excluded, as the transport counts). */
    public long[] bytesSent() {
        long[] bytes = new long[workers];
        forEachMessage((r, f, times) -> bytes[r] += times * f.bytes());
        return bytes;
    }

    /** Of {@link #bytesSent()}, the bytes whose message crosses between nodes. */
    public long[] interNodeBytes(ClusterSpec cluster) {
        long[] bytes = new long[workers];
        forEachMessage((r, f, times) -> {
            if (cluster.node(r) != cluster.node(f.to()[r])) {
                bytes[r] += times * f.bytes();
            }
        });
        return bytes;
    }

    /** Messages each rank sends in the pass (each pays one latency). */
    public long[] messagesSent() {
        long[] count = new long[workers];
        forEachMessage((r, f, times) -> count[r] += times);
        return count;
    }

    private interface MessageVisitor {
        void visit(int rank, Round.Flow flow, long times);
    }

    private void forEachMessage(MessageVisitor visitor) {
        for (Step s : steps) {
            for (Round round : s.rounds()) {
                for (Round.Flow f : round.flows()) {
                    for (int r = 0; r < workers; r++) {
                        if (f.sends(r)) {
                            visitor.visit(r, f, s.repeat());
                        }
                    }
                }
            }
        }
    }
}
