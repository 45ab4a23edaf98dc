package org.attn4j.distributed.sequence;

/**
 * The {@code R x C} processor grid of ATTENTION2D (Elango et al., section 3.2): {@code R} rows, {@code C}
 * columns, {@code P = R C} workers. Worker {@code w} is processor {@code p(r, c)} with {@code w = r + R c}
 * (column-major, the paper's numbering for {@code R = C = sqrt(P)}) and holds the cyclic 1D shard of q, k, v:
 * positions {@code w, w + P, w + 2P, ...} ({@link SequenceLayout#STRIPED}).
 * <pre>
 *   P = 6, grid 3 x 2          column 0   column 1
 *                     row 0    p0         p3         row r gathers the queries  r + R j  (N/R of them)
 *                     row 1    p1         p4         column c gathers the keys   c + C j  (N/C of them)
 *                     row 2    p2         p5
 *   K/V transpose: p(r, c) needs the key shard of row-major index c + C r; shard w goes to p(w / C, w mod C)
 *     needs:  p0 0, p1 2, p2 4, p3 1, p4 3, p5 5      moves: 1 -> 3 -> 4 -> 2 -> 1, workers 0 and 5 keep theirs
 * </pre>
 * On a square grid the transpose is the paper's pairwise exchange {@code p(r, c) <-> p(c, r)}; on a rectangle it
 * is a permutation of the shards (cycles instead of pairs), still one shard in and one out per worker.
 *
 * <p>Which side gets the larger factor: a row (its {@code C} members) carries the query-side traffic, per step
 * {@code 2 X_q + X_lse} forward and {@code 4 X_q + X_lse} backward; a column (its {@code R} members) the
 * key-side traffic, {@code 2 X_kv} forward and {@code 4 X_kv} backward (docs/algorithms.md). Since
 * {@code X_kv <= X_q} (GQA never has more K/V heads than query heads), {@link #forWorkers} makes the columns the
 * smaller factor: {@code R >= C}. With few K/V heads an even flatter grid sends less (the continuous optimum is
 * {@code C/R = 6 X_kv / (6 X_q + 2 X_lse)}); {@link #leastTraffic} finds it, or pass a grid explicitly.
 *
 * @param rows    R, at least 1
 * @param columns C, at least 1
 */
public record ProcessorGrid(int rows, int columns) {

    /**
     * @throws IllegalArgumentException if a side is below 1
     */
    public ProcessorGrid {
        if (rows < 1 || columns < 1) {
            throw new IllegalArgumentException("ProcessorGrid: rows and columns must be >= 1, got " + rows + " x "
                    + columns);
        }
    }

    /**
     * The most square grid of {@code workers}: {@code C} the largest divisor with {@code C <= sqrt(P)},
     * {@code R = P / C} (so 2 = 2 x 1, 6 = 3 x 2, 8 = 4 x 2, 9 = 3 x 3; a prime is {@code P x 1}).
     *
     * @throws IllegalArgumentException if {@code workers < 1}
     */
    public static ProcessorGrid forWorkers(int workers) {
        if (workers < 1) {
            throw new IllegalArgumentException("ProcessorGrid: needs at least 1 worker, got " + workers);
        }
        int c = (int) Math.sqrt(workers);
        while (workers % c != 0) {
            c--;
        }
        return new ProcessorGrid(workers / c, c);
    }

    /**
     * The grid of {@code workers} whose workers send the fewest bytes over a forward and a backward pass, by the
     * formula of docs/algorithms.md: per worker {@code (C-1)(6 X_q + 2 X_lse) + (R-1) 6 X_kv}, plus {@code 4 X_kv}
     * for the transposes when both sides exceed 1 (an upper bound: a few workers keep their shard). Ties go to
     * the more square grid. E.g. 4 workers with H = Hkv: 2 x 2; with H = 4 Hkv: 4 x 1.
     *
     * @throws IllegalArgumentException if a count is below 1 or {@code heads} is not a multiple of {@code kvHeads}
     */
    public static ProcessorGrid leastTraffic(int workers, int heads, int kvHeads, int headDim) {
        if (workers < 1 || heads < 1 || kvHeads < 1 || headDim < 1 || heads % kvHeads != 0) {
            throw new IllegalArgumentException("ProcessorGrid: need workers, heads, kvHeads, headDim >= 1 and heads"
                    + " a multiple of kvHeads, got " + workers + ", " + heads + ", " + kvHeads + ", " + headDim);
        }
        ProcessorGrid best = null;
        long bestCost = Long.MAX_VALUE;
        for (int c = (int) Math.sqrt(workers); c >= 1; c--) {            // most square first, so ties stay
            if (workers % c != 0) {
                continue;
            }
            for (ProcessorGrid g : new ProcessorGrid[] {new ProcessorGrid(workers / c, c),
                new ProcessorGrid(c, workers / c)}) {
                long cost = g.traffic(heads, kvHeads, headDim);
                if (cost < bestCost) {
                    best = g;
                    bestCost = cost;
                }
            }
        }
        return best;
    }

    /** Bytes per worker over both passes, in units of {@code B (N/P) w}; see {@link #leastTraffic}. */
    private long traffic(long heads, long kvHeads, long headDim) {
        long xq = heads * headDim;
        long xkv = kvHeads * headDim;
        long transposes = rows > 1 && columns > 1 ? 4 * xkv : 0;
        return (columns - 1) * (6 * xq + 2 * heads) + (rows - 1) * 6 * xkv + transposes;
    }

    /** P, the number of processors. */
    public int size() {
        return rows * columns;
    }

    /** Whether the grid is {@code sqrt(P) x sqrt(P)}. */
    public boolean isSquare() {
        return rows == columns;
    }

    /** The worker that is processor {@code p(row, column)}: {@code row + R column}. */
    public int worker(int row, int column) {
        return row + rows * column;
    }

    /** The grid row of {@code worker}. */
    public int row(int worker) {
        return worker % rows;
    }

    /** The grid column of {@code worker}. */
    public int column(int worker) {
        return worker / rows;
    }

    /**
     * The striped K/V shard that processor {@code p(row, column)} holds after the transpose: its row-major
     * index {@code column + C row}, so column {@code c} holds the key positions congruent to {@code c} mod C.
     */
    public int keyShard(int row, int column) {
        return column + columns * row;
    }

    /** The worker that holds striped K/V shard {@code shard} after the transpose (inverse of {@link #keyShard}). */
    public int keyHolder(int shard) {
        return worker(shard / columns, shard % columns);
    }

    @Override
    public String toString() {
        return rows + " x " + columns;
    }
}
