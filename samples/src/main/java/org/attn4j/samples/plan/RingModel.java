package org.attn4j.samples.plan;

import java.util.List;

/**
 * Ring attention (BurstAttention, algorithms 1-2; attn4j's {@code RingAttention}): the P ranks in rank order
 * form one ring. Forward: P steps, each computing one K/V block while the next block ({@code 2 X_kv}) travels
 * to the next rank, the last step without a send. Backward: P steps, K/V travelling as in the forward pass and
 * the dK/dV accumulators ({@code 2 X_kv}) one hop behind them, the last hop after the last compute.
 */
final class RingModel implements AlgorithmModel {

    @Override
    public String name() {
        return "ring";
    }

    @Override
    public String source() {
        return "BurstAttention, algorithms 1-2";
    }

    @Override
    public boolean linearAttention() {
        return false;
    }

    @Override
    public String unavailable(PlanProblem problem) {
        return null;
    }

    @Override
    public List<Candidate> candidates(PlanProblem problem) {
        int p = problem.workers();
        Round.Flow kv = Round.Flow.of(p, 2 * problem.xkv(), r -> (r + 1) % p);
        double forward = problem.forwardSeconds() / p;
        double backward = problem.backwardSeconds() / p;
        Schedule fwd = new Schedule(p).overlapped(p - 1, forward, Round.of(kv)).compute(forward);
        Schedule bwd = new Schedule(p).overlapped(p - 1, backward, Round.of(kv, kv)).compute(backward)
                .comm(Round.of(kv));
        return List.of(new Candidate("P=" + p, null, fwd, bwd));
    }
}
