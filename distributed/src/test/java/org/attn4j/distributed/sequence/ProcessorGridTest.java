package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

/** The ATTENTION2D grid: default shapes, numbering, and the K/V transpose as a permutation of the shards. */
class ProcessorGridTest {

    @Test
    void picksTheMostSquareGridWithTheLargerFactorOnTheRows() {
        int[][] expected = {{1, 1, 1}, {2, 2, 1}, {3, 3, 1}, {4, 2, 2}, {6, 3, 2}, {8, 4, 2}, {9, 3, 3}, {12, 4, 3},
            {16, 4, 4}, {18, 6, 3}, {7, 7, 1}};
        for (int[] e : expected) {
            assertEquals(new ProcessorGrid(e[1], e[2]), ProcessorGrid.forWorkers(e[0]), "P = " + e[0]);
        }
    }

    @Test
    void transposeGivesEveryColumnTheKeysCongruentToItsIndex() {
        for (ProcessorGrid g : new ProcessorGrid[] {new ProcessorGrid(3, 2), new ProcessorGrid(2, 3),
            new ProcessorGrid(4, 2), new ProcessorGrid(3, 3), new ProcessorGrid(5, 1), new ProcessorGrid(1, 4)}) {
            int p = g.size();
            boolean[] held = new boolean[p];
            for (int w = 0; w < p; w++) {
                int r = g.row(w);
                int c = g.column(w);
                assertEquals(w, g.worker(r, c), g + ": numbering");
                int shard = g.keyShard(r, c);
                assertEquals(c, shard % g.columns(), g + ": p(" + r + ", " + c + ") holds shard " + shard);
                assertEquals(w, g.keyHolder(shard), g + ": holder of shard " + shard);
                held[shard] = true;
            }
            boolean[] all = new boolean[p];
            Arrays.fill(all, true);
            assertTrue(Arrays.equals(all, held), g + ": every shard is held once");
        }
    }

    @Test
    void squareTransposeIsThePapersPairwiseExchange() {
        ProcessorGrid g = new ProcessorGrid(3, 3);
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++) {
                assertEquals(g.worker(c, r), g.keyShard(r, c), "p(" + r + ", " + c + ") receives from p(c, r)");
            }
        }
    }

    @Test
    void leastTrafficFlattensTheGridWhenKeysAndValuesHaveFewHeads() {
        assertEquals(new ProcessorGrid(2, 2), ProcessorGrid.leastTraffic(4, 4, 4, 8));
        assertEquals(new ProcessorGrid(4, 1), ProcessorGrid.leastTraffic(4, 4, 1, 8));
        assertEquals(new ProcessorGrid(3, 2), ProcessorGrid.leastTraffic(6, 8, 8, 64));
        assertEquals(new ProcessorGrid(8, 8), ProcessorGrid.leastTraffic(64, 8, 8, 64));
        assertEquals(new ProcessorGrid(16, 4), ProcessorGrid.leastTraffic(64, 8, 2, 64));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ProcessorGrid.leastTraffic(4, 6, 4, 8));
        assertEquals("ProcessorGrid: need workers, heads, kvHeads, headDim >= 1 and heads a multiple of kvHeads,"
                + " got 4, 6, 4, 8", e.getMessage());
    }

    @Test
    void refusesAnEmptySide() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new ProcessorGrid(0, 3));
        assertEquals("ProcessorGrid: rows and columns must be >= 1, got 0 x 3", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> ProcessorGrid.forWorkers(0));
        assertEquals("ProcessorGrid: needs at least 1 worker, got 0", e.getMessage());
    }
}
