package org.attn4j.distributed.plan;

import java.util.List;

/**
 * LASP (Sun et al., LASP, section 2, algorithms 2-3; attn4j's {@code LaspAttention}) for linear attention: only
 * the {@code D x D} state of each query head travels ({@code B H D^2 w}, LASP table 1: {@code B d^2 / h}).
 * Causal: a chain; attn4j runs member {@code i}'s whole chunk after the state of member {@code i - 1} arrives,
 * so the chain is serial: P local passes and {@code P - 1} hops on the critical path, forward and backward.
 * Non-causal: a ring all-reduce of {@code K^T V} (forward) and {@code Q^T dO} (backward) between two local
 * passes, as attn4j runs it.
 */
public final class LaspModel implements AlgorithmModel {

    @Override
    public String name() {
        return "lasp";
    }

    @Override
    public String source() {
        return "LASP, section 2, algorithms 2-3";
    }

    @Override
    public boolean linearAttention() {
        return true;
    }

    @Override
    public List<Candidate> candidates(PlanProblem problem) {
        int p = problem.workers();
        long state = problem.state();
        double forward = problem.forwardSeconds();
        double backward = problem.backwardSeconds();
        if (!problem.causal()) {
            Round part = Round.of(p, state / p, r -> (r + 1) % p);
            Schedule fwd = new Schedule(p).compute(forward).comm(2L * (p - 1), part).compute(forward);
            Schedule bwd = new Schedule(p).compute(backward).comm(2L * (p - 1), part).compute(backward);
            return List.of(new Candidate("ring all-reduce of K^T V", null, fwd, bwd));
        }
        Schedule fwd = new Schedule(p).compute(forward);
        Schedule bwd = new Schedule(p).compute(backward);
        for (int j = 0; j < p - 1; j++) {
            fwd.comm(hop(p, j, j + 1, state)).compute(forward);
            bwd.comm(hop(p, p - 1 - j, p - 2 - j, state)).compute(backward);
        }
        return List.of(new Candidate("serial chain of " + p, null, fwd, bwd));
    }

    /** One message of {@code bytes} from rank {@code from} to rank {@code to}; nobody else sends. */
    private static Round hop(int p, int from, int to, long bytes) {
        return Round.of(p, bytes, r -> r == from ? to : Round.NONE);
    }
}
