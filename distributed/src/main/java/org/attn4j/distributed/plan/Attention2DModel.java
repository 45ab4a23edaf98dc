package org.attn4j.distributed.plan;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

import org.attn4j.distributed.sequence.ProcessorGrid;

/**
 * ATTENTION2D (Elango, ATTENTION2D, section 3) on an {@code R x C} {@link ProcessorGrid}, rank {@code w = r + R c}
 * being processor {@code p(r, c)} as in attn4j's {@code Attention2D} and {@code Attention2DOverlap} (columns are
 * consecutive ranks, so column collectives stay in a node when the node holds a column). The row collectives carry
 * q, the column ones K/V. Priced: attn4j's default grid, {@link ProcessorGrid#forWorkers} ({@code R >= C}), which
 * the report shows, and on a rectangle also the transposed {@code C x R} grid, listed as an alternative (attn4j
 * runs it when given that grid).
 *
 * <p>ATTENTION2D-NO (section 3.2, algorithms 1 and 3) runs its phases one after another: K/V transpose, row
 * all-gather of q, column all-gathers of k and v, local flash, row reduce-scatter of (O, LSE); backward: row
 * all-gathers of q, O, dO, LSE, column all-gathers of k, v, flash backward, row reduce-scatter of dQ, column
 * reduce-scatters of dK, dV, transpose back. ATTENTION2D-O (section 3.4, algorithms 4-6 and 8-11) moves the
 * same bytes in ring steps that overlap the flash calls on {@code N/P x N/P} blocks (gather+compute in the
 * column, then gather+compute+scatter in the row); only the transposes and the last scatter are exposed.
 */
public final class Attention2DModel implements AlgorithmModel {

    private final boolean overlap;

    /** @param overlap ATTENTION2D-O (true) or ATTENTION2D-NO (false) */
    public Attention2DModel(boolean overlap) {
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
    public List<Candidate> candidates(PlanProblem problem) {
        ProcessorGrid grid = ProcessorGrid.forWorkers(problem.workers());
        List<Candidate> out = new ArrayList<>();
        out.add(candidate(problem, grid, null));
        if (!grid.isSquare()) {
            out.add(candidate(problem, new ProcessorGrid(grid.columns(), grid.rows()),
                    "run with new ProcessorGrid(" + grid.columns() + ", " + grid.rows() + "); attn4j's default grid is "
                            + grid));
        }
        return out;
    }

    /** The report shows attn4j's default grid, the first candidate, and lists the transposed one. */
    @Override
    public boolean reportsFastest() {
        return false;
    }

    /** The schedules on {@code grid}. */
    Candidate candidate(PlanProblem problem, ProcessorGrid grid, String note) {
        Grid g = new Grid(grid);
        Schedule fwd = overlap ? overlappedForward(problem, g) : forward(problem, g);
        Schedule bwd = overlap ? overlappedBackward(problem, g) : backward(problem, g);
        return new Candidate(grid + " grid", note, fwd, bwd);
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
        Round.Flow back = g.transposeBack(2 * pr.xkv());
        if (g.cols == 1) {
            return ridingColumnBackward(s, g, block, kv).comm(Round.of(back));
        }
        Round.Flow inputs = g.row(3 * pr.xq() + pr.xlse());
        Round.Flow dq = g.row(pr.xq());
        gatherDownColumn(s, g, block, kv, inputs);
        for (int i = 1; i < g.cols - 1; i++) {
            s.overlapped(1, pr.backwardSeconds() / g.cols, round(inputs, i > 1 ? dq : null));
        }
        // the last row step (algorithm 11): its rows blocks one by one, dK/dV partials scattered up the column
        s.overlapped(1, block, round(g.cols > 2 ? dq : null));
        s.overlapped(g.rows - 1, block, round(kv));
        return s.comm(Round.of(dq)).comm(Round.of(back));
    }

    /**
     * Algorithm 9 on an {@code R x 1} grid, where the own query block is the only one: the dK/dV reduce-scatter
     * rides the K/V gather ring. Step {@code s} sends the K/V block on ({@code s < R-1}) and, from {@code s = 1},
     * posts its dK/dV partial up after its compute, so the partial of step {@code s} travels during step
     * {@code s + 1} and the last one after the last compute.
     */
    private static Schedule ridingColumnBackward(Schedule s, Grid g, double block, Round.Flow kv) {
        if (g.rows == 1) {
            return s.compute(block);
        }
        s.overlapped(Math.min(2, g.rows - 1), block, round(kv));
        s.overlapped(g.rows - 3, block, round(kv, kv));
        if (g.rows >= 3) {
            s.overlapped(1, block, round(kv));
        } else {
            s.compute(block);
        }
        return s.comm(Round.of(kv));
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

    /** The flows of a {@link ProcessorGrid} on node-major ranks (rank {@code w} is attn4j's worker {@code w}). */
    private static final class Grid {
        final ProcessorGrid grid;
        final int rows;
        final int cols;
        final int p;

        Grid(ProcessorGrid grid) {
            this.grid = grid;
            this.rows = grid.rows();
            this.cols = grid.columns();
            this.p = grid.size();
        }

        /** Rank of {@code p(r, c)}, indices taken round the grid. */
        int rank(int r, int c) {
            return grid.worker(Math.floorMod(r, rows), Math.floorMod(c, cols));
        }

        /** Ring step along the row: {@code p(r, c)} to {@code p(r, c + 1)}. */
        Round.Flow row(long bytes) {
            return Round.Flow.of(p, bytes, w -> rank(grid.row(w), grid.column(w) + 1));
        }

        /** Ring step along the column: {@code p(r, c)} to {@code p(r + 1, c)}. */
        Round.Flow column(long bytes) {
            return Round.Flow.of(p, bytes, w -> rank(grid.row(w) + 1, grid.column(w)));
        }

        /**
         * The K/V transpose: rank {@code w} holds striped shard {@code w}, which {@link ProcessorGrid#keyHolder}
         * needs (a pairwise swap {@code p(r, c) <-> p(c, r)} on a square grid, cycles on a rectangle).
         */
        Round.Flow transpose(long bytes) {
            return Round.Flow.of(p, bytes, grid::keyHolder);
        }

        /** The transpose back: {@code p(r, c)} returns shard {@link ProcessorGrid#keyShard} to its rank. */
        Round.Flow transposeBack(long bytes) {
            return Round.Flow.of(p, bytes, w -> grid.keyShard(grid.row(w), grid.column(w)));
        }
    }
}
