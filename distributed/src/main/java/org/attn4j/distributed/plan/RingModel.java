package org.attn4j.distributed.plan;

import java.util.List;

/**
 * Ring attention (BurstAttention, algorithms 1-2; attn4j's {@code RingAttention}): the P ranks in rank order
 * form one ring. Forward: P steps, each computing one K/V block while the next block ({@code 2 X_kv}) travels
 * to the next rank, the last step without a send. Backward, P steps, whichever side attn4j moves
 * ({@code RingAttention.queriesTravel}): the query bundle (q, dO, LSE, Delta: {@code 2 X_q + 2 X_lse})
 * travelling to the previous rank ahead of the compute and the dQ accumulator ({@code X_q}) one step behind it,
 * the last dQ going home after the last compute (BurstAttention's algorithm 2); or, when K/V are the smaller side
 * (GQA), the K/V blocks ahead and the dK/dV accumulators ({@code 2 X_kv}) behind, towards the next rank.
 */
public final class RingModel implements AlgorithmModel {

    @Override
    public String name() {
        return "ring";
    }

    @Override
    public String source() {
        return "BurstAttention, algorithms 1-2";
    }

    @Override
    public List<Candidate> candidates(PlanProblem problem) {
        int p = problem.workers();
        long xq = problem.xq();
        long xkv = problem.xkv();
        Round.Flow kv = Round.Flow.of(p, 2 * xkv, r -> (r + 1) % p);
        double forward = problem.forwardSeconds() / p;
        double backward = problem.backwardSeconds() / p;
        Schedule fwd = new Schedule(p).ring(p, forward, kv, null, null);
        if (3 * xq + 2 * problem.xlse() <= 4 * xkv) {        // RingAttention.queriesTravel, times B (N/P) w
            Round.Flow bundle = Round.Flow.of(p, 2 * xq + 2 * problem.xlse(), r -> (r + p - 1) % p);
            Round.Flow dq = Round.Flow.of(p, xq, r -> (r + p - 1) % p);
            Schedule bwd = new Schedule(p).ring(p, backward, bundle, dq, dq);
            return List.of(new Candidate("P=" + p + ", bwd: queries travel", null, fwd, bwd));
        }
        Round.Flow grads = Round.Flow.of(p, 2 * xkv, r -> (r + 1) % p);
        Schedule bwd = new Schedule(p).ring(p, backward, kv, grads, grads);
        return List.of(new Candidate("P=" + p + ", bwd: K/V travel", null, fwd, bwd));
    }
}
