package org.attn4j.samples.plan;

/**
 * Bytes each rank sends per layer, in closed form: the formulas of docs/algorithms.md in one place. The cost
 * model's schedules must add up to these (PlanFormulasTest), and attn4j's algorithms must send exactly these
 * (the transport's counters; PlanFormulasTest runs them in one JVM). {@code X_q = B H (N/P) D w},
 * {@code X_kv = B Hkv (N/P) D w}, {@code X_lse = B H (N/P) w}.
 */
public final class CommunicationFormulas {

    /**
     * Bytes one rank sends in each pass.
     *
     * @param forward  forward pass
     * @param backward backward pass
     */
    public record Volume(long forward, long backward) {
    }

    private CommunicationFormulas() {
    }

    /** Ring attention: {@code (P-1) 2 X_kv} / {@code (P-1) 2 X_kv + P 2 X_kv} (every rank alike). */
    public static Volume ring(int p, long xkv) {
        return new Volume((p - 1) * 2 * xkv, (p - 1) * 2 * xkv + (p > 1 ? p * 2 * xkv : 0));
    }

    /**
     * WallFacer with team size C, {@code R = P / C^2}, for team member {@code local}:
     * forward {@code (C-1)(2 X_q + 2 X_kv + X_lse) + R' 2 C X_kv}, backward
     * {@code (C-1)(4 X_q + 4 X_kv + X_lse) + (2R - 1 + 2 [local != 0]) 2 C X_kv} (for {@code R > 1}), where
     * {@code R' = R} for members other than 0 (their team's K/V go to their sub-ring first) and {@code R - 1}
     * for member 0. C = 1 is ring attention.
     */
    public static Volume wallFacer(int p, int c, int local, long xq, long xkv, long xlse) {
        long r = p / ((long) c * c);
        long block = 2L * c * xkv;
        long place = local != 0 ? 1 : 0;
        long hops = r > 1 ? r - 1 : 0;
        long grads = r > 1 ? r : 0;
        long forward = (c - 1) * (2 * xq + 2 * xkv + xlse) + (place + hops) * block;
        long backward = (c - 1) * (4 * xq + 4 * xkv + xlse) + (2 * place + hops + grads) * block;
        return new Volume(forward, backward);
    }

    /**
     * ATTENTION2D (NO and O alike) on a {@code rows x cols} grid: forward
     * {@code [moves] 2 X_kv + (cols-1)(2 X_q + X_lse) + (rows-1) 2 X_kv}, backward
     * {@code (cols-1)(4 X_q + X_lse) + (rows-1) 4 X_kv + [moves] 2 X_kv}; on the square {@code g x g} grid this is
     * docs/algorithms.md's {@code [r != c] 2 X_kv + (g-1)(2 X_q + 2 X_kv + X_lse)} and
     * {@code (g-1)(4 X_q + 4 X_kv + X_lse) + [r != c] 2 X_kv}.
     *
     * @param moves whether the rank's K/V leave it in the transpose (not {@code p(r, r)} of a square grid)
     */
    public static Volume attention2d(int rows, int cols, boolean moves, long xq, long xkv, long xlse) {
        long transpose = moves ? 2 * xkv : 0;
        long forward = transpose + (cols - 1) * (2 * xq + xlse) + (rows - 1) * 2 * xkv;
        long backward = (cols - 1) * (4 * xq + xlse) + (rows - 1) * 4 * xkv + transpose;
        return new Volume(forward, backward);
    }

    /** Ulysses: {@code (P-1)/P (2 X_q + 2 X_kv + X_lse)} / {@code (P-1)/P (2 X_q + 2 X_kv)}. */
    public static Volume ulysses(int p, long xq, long xkv, long xlse) {
        return new Volume((p - 1) * (2 * xq + 2 * xkv + xlse) / p, (p - 1) * (2 * xq + 2 * xkv) / p);
    }

    /** Causal LASP, rank {@code rank}: a state forward (all but the last rank), one back (all but the first). */
    public static Volume laspCausal(int p, int rank, long state) {
        return new Volume(rank < p - 1 ? state : 0, rank > 0 ? state : 0);
    }

    /** Non-causal LASP: a ring all-reduce of the state each way, {@code 2 (P-1) state / P} (state split in P). */
    public static Volume laspAllReduce(int p, long state) {
        long v = 2L * (p - 1) * (state / p);
        return new Volume(v, v);
    }
}
