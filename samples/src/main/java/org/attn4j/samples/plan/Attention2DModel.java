package org.attn4j.samples.plan;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * ATTENTION2D (Elango, ATTENTION2D, section 3) on the most square {@code rows x cols} grid of P, rank
 * {@code w = r + rows c} being processor {@code p(r, c)} (attn4j's {@code Attention2D}; columns are consecutive
 * ranks, so column collectives stay in a node when the node holds a column). Both orientations of a rectangular
 * grid are priced; the row collectives carry q, the column ones K/V.
 *
 * <p>ATTENTION2D-NO (section 3.2, algorithms 1 and 3) runs its phases one after another: K/V transpose, row
 * all-gather of q, column all-gathers of k and v, local flash, row reduce-scatter of (O, LSE); backward: row
 * all-gathers of q, O, dO, LSE, column all-gathers of k, v, flash backward, row reduce-scatter of dQ, column
 * reduce-scatters of dK, dV, transpose back. ATTENTION2D-O (section 3.4, algorithms 4-6 and 8-11) moves the
 * same bytes in ring steps that overlap the flash calls on {@code N/P x N/P} blocks (gather+compute in the
 * column, then gather+compute+scatter in the row); only the transposes and the last scatter are exposed.
 */
final class Attention2DModel implements AlgorithmModel {

    private final boolean overlap;

    /** @param overlap ATTENTION2D-O (true) or ATTENTION2D-NO (false) */
    Attention2DModel(boolean overlap) {
        this.overlap = overlap;
    }

    @Override
    public String name() {
        return overlap ? "attention2d-overlap" : "attention2d";
    }

    @Override
    public String source() {
        return overlap ? "ATTENTION2D-O, section 3.4, algorithms 4-6 and 8-11"
                : "ATTENTION2D-NO, section 3.2, algorithms 1-3";
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
        int a = mostSquareRows(p);
        List<Candidate> out = new ArrayList<>();
        out.add(candidate(problem, a, p / a));
        if (a != p / a) {
            out.add(candidate(problem, p / a, a));
        }
        return out;
    }

    /** The largest divisor of {@code p} not above its square root. */
    static int mostSquareRows(int p) {
        int a = (int) Math.floor(Math.sqrt(p));
        while (p % a != 0) {
            a--;
        }
        return a;
    }

    /** The schedules on a {@code rows x cols} grid. */
    Candidate candidate(PlanProblem problem, int rows, int cols) {
        Grid g = new Grid(rows, cols);
        Schedule fwd = overlap ? overlappedForward(problem, g) : forward(problem, g);
        Schedule bwd = overlap ? overlappedBackward(problem, g) : backward(problem, g);
        List<String> notes = new ArrayList<>();
        if (overlap) {
            notes.add("not implemented in attn4j");
        }
        if (rows != cols) {
            notes.add("rectangular grid: attn4j runs square grids");
        }
        return new Candidate(rows + " x " + cols + " grid", notes.isEmpty() ? null : String.join("; ", notes),
                fwd, bwd);
    }

    private static Schedule forward(PlanProblem pr, Grid g) {
        Schedule s = new Schedule(g.p).comm(Round.of(g.transpose(2 * pr.xkv())));
        s.comm(g.cols - 1, Round.of(g.row(pr.xq())));
        s.comm(g.rows - 1, Round.of(g.column(pr.xkv())));
        s.comm(g.rows - 1, Round.of(g.column(pr.xkv())));
        s.compute(pr.forwardSeconds());
        return s.comm(g.cols - 1, Round.of(g.row(pr.xq() + pr.xlse())));
    }

    private static Schedule backward(PlanProblem pr, Grid g) {
        Schedule s = new Schedule(g.p);
        for (long x : new long[] {pr.xq(), pr.xq(), pr.xq(), pr.xlse()}) {
            s.comm(g.cols - 1, Round.of(g.row(x)));
        }
        s.comm(g.rows - 1, Round.of(g.column(pr.xkv())));
        s.comm(g.rows - 1, Round.of(g.column(pr.xkv())));
        s.compute(pr.backwardSeconds());
        s.comm(g.cols - 1, Round.of(g.row(pr.xq())));
        s.comm(g.rows - 1, Round.of(g.column(pr.xkv())));
        s.comm(g.rows - 1, Round.of(g.column(pr.xkv())));
        return s.comm(Round.of(g.transposeBack(2 * pr.xkv())));
    }

    /** Algorithms 4-6: transpose; gather+compute down the column; gather+compute+scatter along the row. */
    private static Schedule overlappedForward(PlanProblem pr, Grid g) {
        double block = pr.forwardSeconds() / g.p;              // one N/P x N/P block
        Schedule s = new Schedule(g.p).comm(Round.of(g.transpose(2 * pr.xkv())));
        Round.Flow kv = g.rows > 1 ? g.column(2 * pr.xkv()) : null;
        gatherDownColumn(s, g, block, kv, g.cols > 1 ? g.row(pr.xq()) : null);
        Round.Flow q = g.row(pr.xq());
        Round.Flow partial = g.row(pr.xq() + pr.xlse());
        for (int i = 1; i <= g.cols - 1; i++) {
            s.overlapped(1, pr.forwardSeconds() / g.cols, round(i < g.cols - 1 ? q : null, i > 1 ? partial : null));
        }
        return g.cols > 1 ? s.comm(Round.of(partial)) : s;
    }

    /** Algorithms 8-11: as the forward pass, with q, O, dO, LSE gathered and dQ, dK, dV scattered. */
    private static Schedule overlappedBackward(PlanProblem pr, Grid g) {
        double block = pr.backwardSeconds() / g.p;
        Schedule s = new Schedule(g.p);
        Round.Flow kv = g.rows > 1 ? g.column(2 * pr.xkv()) : null;
        Round.Flow inputs = g.row(3 * pr.xq() + pr.xlse());
        Round.Flow dq = g.row(pr.xq());
        gatherDownColumn(s, g, block, kv, g.cols > 1 ? inputs : null);
        for (int i = 1; i < g.cols - 1; i++) {
            s.overlapped(1, pr.backwardSeconds() / g.cols, round(inputs, i > 1 ? dq : null));
        }
        if (g.cols > 1) {
            // the last row step (algorithm 11): its rows blocks one by one, dK/dV partials scattered up the column
            s.overlapped(1, block, round(g.cols > 2 ? dq : null));
            s.overlapped(g.rows - 1, block, round(kv));
            s.comm(Round.of(dq));
        } else {
            s.comm(g.rows - 1, Round.of(g.column(2 * pr.xkv())));
        }
        return s.comm(Round.of(g.transposeBack(2 * pr.xkv())));
    }

    /** {@code rows} steps of one block each; K/V travel up the column, the first step also sends {@code first}. */
    private static void gatherDownColumn(Schedule s, Grid g, double block, Round.Flow kv, Round.Flow first) {
        if (g.rows == 1) {
            s.overlapped(1, block, round(first));
            return;
        }
        s.overlapped(1, block, round(kv, first));
        s.overlapped(g.rows - 2, block, round(kv));
        s.compute(block);
    }

    private static Round round(Round.Flow... flows) {
        return new Round(Arrays.stream(flows).filter(Objects::nonNull).toList());
    }

    /** The processor grid on node-major ranks. */
    private static final class Grid {
        final int rows;
        final int cols;
        final int p;

        Grid(int rows, int cols) {
            this.rows = rows;
            this.cols = cols;
            this.p = rows * cols;
        }

        /** Rank of {@code p(r, c)}. */
        int rank(int r, int c) {
            return Math.floorMod(r, rows) + rows * Math.floorMod(c, cols);
        }

        /** Ring step along the row: {@code p(r, c)} to {@code p(r, c + 1)}. */
        Round.Flow row(long bytes) {
            return Round.Flow.of(p, bytes, w -> rank(w % rows, w / rows + 1));
        }

        /** Ring step along the column: {@code p(r, c)} to {@code p(r + 1, c)}. */
        Round.Flow column(long bytes) {
            return Round.Flow.of(p, bytes, w -> rank(w % rows + 1, w / rows));
        }

        /**
         * Column-major to row-major: rank {@code s} holds the K/V of column-major index {@code s}, which
         * {@code p(s / cols, s mod cols)} needs (a pairwise swap with {@code p(c, r)} on a square grid).
         */
        Round.Flow transpose(long bytes) {
            return Round.Flow.of(p, bytes, s -> rank(s / cols, s % cols));
        }

        /** Row-major back to column-major: {@code p(r, c)} returns its block to rank {@code cols r + c}. */
        Round.Flow transposeBack(long bytes) {
            return Round.Flow.of(p, bytes, w -> cols * (w % rows) + w / rows);
        }
    }
}
