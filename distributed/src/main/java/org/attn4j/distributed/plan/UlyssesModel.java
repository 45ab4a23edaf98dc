package org.attn4j.distributed.plan;

import java.util.ArrayList;
import java.util.List;

/**
 * DeepSpeed-Ulysses (the papers' all-to-all baseline; attn4j's {@code UlyssesAttention}): all-to-alls of q, k
 * and v to head shards, flash over the whole sequence for {@code H/P} heads, all-to-alls of O and LSE back;
 * backward: all-to-all of dO in, flash backward, all-to-alls of dQ, dK, dV out. Each all-to-all posts its
 * {@code P - 1} messages of {@code X/P} at once (one round), so they share the node's links and adapters.
 */
public final class UlyssesModel implements AlgorithmModel {

    @Override
    public String name() {
        return "ulysses";
    }

    @Override
    public String source() {
        return "DeepSpeed-Ulysses (ATTENTION2D table 1; LASP table 1)";
    }

    @Override
    public String unavailable(PlanProblem problem) {
        int p = problem.workers();
        int h = problem.model().heads();
        int hkv = problem.model().kvHeads();
        if (h % p != 0 || hkv % p != 0) {
            return "P = " + p + " must divide H = " + h + " and Hkv = " + hkv
                    + " (each worker takes whole K/V heads)";
        }
        return null;
    }

    @Override
    public List<Candidate> candidates(PlanProblem problem) {
        int p = problem.workers();
        Schedule fwd = new Schedule(p);
        for (long x : new long[] {problem.xq(), problem.xkv(), problem.xkv()}) {
            fwd.comm(allToAll(p, x));
        }
        fwd.compute(problem.forwardSeconds());
        fwd.comm(allToAll(p, problem.xq()));
        fwd.comm(allToAll(p, problem.xlse()));
        Schedule bwd = new Schedule(p).comm(allToAll(p, problem.xq())).compute(problem.backwardSeconds());
        for (long x : new long[] {problem.xq(), problem.xkv(), problem.xkv()}) {
            bwd.comm(allToAll(p, x));
        }
        return List.of(new Candidate("P=" + p + ", " + problem.model().heads() / p + " heads per worker", null,
                fwd, bwd));
    }

    /** One all-to-all of a shard of {@code bytes}: rank r sends {@code bytes / P} to every other rank at once. */
    public static Round allToAll(int p, long bytes) {
        List<Round.Flow> flows = new ArrayList<>();
        for (int s = 1; s < p; s++) {
            int shift = s;
            flows.add(Round.Flow.of(p, bytes / p, r -> (r + shift) % p));
        }
        return new Round(flows);
    }
}
