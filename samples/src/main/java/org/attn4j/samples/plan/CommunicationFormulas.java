package org.attn4j.samples.plan;

/**
 * Bytes each rank sends per layer, in closed form: the formulas of docs/algorithms.md in one place. The cost
 * model's schedules must add up to these (PlanFormulasTest), and attn4j's algorithms send exactly these (the
 * transport's counters; PlanFormulasMatchImplementationTest runs them in one JVM). {@code X_q = B H (N/P) D w},
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

    /**
     * Whether ring attention's backward pass moves the query side, as attn4j's {@code RingAttention.queriesTravel}
     * decides it: {@code 3 X_q + 2 X_lse <= 4 X_kv} (q, dO, LSE, Delta and dQ against K, V, dK, dV; the same test
     * as {@code 3 H D + 2 H <= 4 Hkv D}, all sizes sharing the factor {@code B (N/P) w}).
     */
    public static boolean ringMovesQueries(long xq, long xkv, long xlse) {
        return 3 * xq + 2 * xlse <= 4 * xkv;
    }

    /**
     * Ring attention with P steps (no sliding window), every rank alike: forward {@code (P-1) 2 X_kv}; backward
     * {@code (P-1)(3 X_q + 2 X_lse) + X_q} when the queries travel (BurstAttention, algorithm 2: the bundle q, dO,
     * LSE, Delta and its dQ, which finally goes home), {@code (P-1) 2 X_kv + P 2 X_kv} when K/V do (see
     * {@link #ringMovesQueries}). For P = 1 nothing leaves: the last term is a send to oneself.
     */
    public static Volume ring(int p, long xq, long xkv, long xlse) {
        if (p == 1) {
            return new Volume(0, 0);
        }
        long forward = (p - 1) * 2 * xkv;
        long backward = ringMovesQueries(xq, xkv, xlse) ? (p - 1) * (3 * xq + 2 * xlse) + xq
                : (p - 1) * 2 * xkv + p * 2 * xkv;
        return new Volume(forward, backward);
    }

    /**
     * WallFacer with team size C, {@code R = P / C^2}, for team member {@code local} (attn4j's
     * {@code WallFacerAttention}, whose backward pass keeps K/V and circulates the query bundles):
     * <pre>
     *   forward   (C-1)(X_q + 2 X_kv) + [local != 0] 2C X_kv + (R-1) 2C X_kv + (C-1)(X_q + X_lse)
     *   backward  (C-1)(2 X_q + 2 X_lse + 2 X_kv) + [local != 0] C (2 X_q + 2 X_lse) + (R-1) C (3 X_q + 2 X_lse)
     *             + [local != 0 or R > 1] C X_q + (C-1)(X_q + 2 X_kv)
     * </pre>
     * (team all-gathers, the first block to the sub-ring, the ring hops, dQ home, team reduce-scatters). C = 1
     * is ring attention with the queries travelling backward.
     */
    public static Volume wallFacer(int p, int c, int local, long xq, long xkv, long xlse) {
        long r = p / ((long) c * c);
        long first = local != 0 ? 1 : 0;
        long bundle = 2 * xq + 2 * xlse;
        long forward = (c - 1) * (xq + 2 * xkv) + (first + r - 1) * 2 * c * xkv + (c - 1) * (xq + xlse);
        long backward = (c - 1) * (bundle + 2 * xkv) + first * c * bundle + (r - 1) * c * (bundle + xq)
                + (local != 0 || r > 1 ? c * xq : 0) + (c - 1) * (xq + 2 * xkv);
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
