package org.attn4j.distributed.plan;

import java.util.List;

/**
 * The cost model of one sequence-parallel algorithm: the forward and backward {@link Schedule} it runs on a
 * problem, for each configuration worth trying (team size, grid shape, placement). The planner prices every
 * candidate on the cluster's {@link Network} and keeps the fastest, as WallFacer's topology scheduler does by
 * profiling (WallFacer, section 3.4, equation 8).
 */
public interface AlgorithmModel {

    /**
     * One configuration of an algorithm.
     *
     * @param config   what was chosen, e.g. "C=2, teams in nodes" or "4 x 4 grid"
     * @param note     a caveat for the report (e.g. a placement attn4j does not use), or null
     * @param forward  the forward pass
     * @param backward the backward pass
     */
    record Candidate(String config, String note, Schedule forward, Schedule backward) {
    }

    /** The name in the report and in {@code --algo}. */
    String name();

    /** The paper, section and algorithm numbers the schedule follows. */
    String source();

    /** Whether this is linear attention (LASP) rather than softmax attention; softmax by default. */
    default boolean linearAttention() {
        return false;
    }

    /** Why the algorithm cannot run this problem, or null when it can (by default it always can). */
    default String unavailable(PlanProblem problem) {
        return null;
    }

    /** The configurations to price; at least one when {@link #unavailable} is null. */
    List<Candidate> candidates(PlanProblem problem);

    /**
     * Whether the report shows the fastest candidate (a scheduler's search, as WallFacer's) or the first one
     * (what attn4j runs by default); the others are listed as alternatives either way.
     */
    default boolean reportsFastest() {
        return true;
    }
}
