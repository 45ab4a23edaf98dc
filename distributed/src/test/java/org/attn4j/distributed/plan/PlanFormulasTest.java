package org.attn4j.distributed.plan;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

import org.attn4j.distributed.sequence.ProcessorGrid;
import org.attn4j.distributed.sequence.Attention2DAlgorithm;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceAlgorithm.ShardBytes;
import org.attn4j.distributed.sequence.SequenceAlgorithm.Volume;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The descriptors' closed-form volumes ({@link SequenceAlgorithm#volume}) against hand-computed values, and the
 * cost models' schedules against the closed forms rank by rank: the model charges the time of exactly the bytes
 * docs/algorithms.md gives (and SequenceAlgorithmConformanceTest checks the algorithms send).
 */
class PlanFormulasTest {

    // B 1, H 4, Hkv 2, D 2, 4-byte elements, N/P = 4: X_q = 4*4*2*4 = 128, X_kv = 2*4*2*4 = 64, X_lse = 4*4*4 = 64
    private static final long XQ = 128;
    private static final long XKV = 64;
    private static final long XLSE = 64;

    private static Volume ring(int p, long xq, long xkv, long xlse) {
        return SequenceAlgorithm.byName("ring").volume(SequenceAlgorithm.Settings.of(p, 4 * p, true),
                new ShardBytes(xq, xkv, xlse, 0), 0);
    }

    private static Volume wallFacer(int p, int c, int member, long xq, long xkv, long xlse) {
        return SequenceAlgorithm.byName("wallfacer").volume(SequenceAlgorithm.Settings.of(p, 4 * p, true)
                .withOption("team", c), new ShardBytes(xq, xkv, xlse, 0), member);
    }

    private static Volume ulysses(int p, long xq, long xkv, long xlse) {
        return SequenceAlgorithm.byName("ulysses").volume(SequenceAlgorithm.Settings.of(p, 4 * p, true),
                new ShardBytes(xq, xkv, xlse, 0), 0);
    }

    private static Volume lasp(int p, boolean causal, int rank, long state) {
        return SequenceAlgorithm.byName("lasp").volume(SequenceAlgorithm.Settings.of(p, 4 * p, causal),
                new ShardBytes(0, 0, 0, state), rank);
    }

    @Test
    void ringMovesTheQueriesBackwardUnlessKvAreTheSmallerSide() {
        // H = Hkv (X_kv = X_q = 128): the query side 3 X_q + 2 X_lse = 512 against 4 X_kv = 512, a tie, which goes
        // to the queries. Backward: 3 bundles (q, dO, LSE, Delta) 3 * 384, 3 dQ hops 3 * 128 and dQ home 128
        assertEquals(new Volume(3 * 256, 3 * 384 + 3 * 128 + 128), ring(4, XQ, XQ, XLSE));
        // H = 2 Hkv: 512 > 4 X_kv = 256, so K/V travel again, with P hops of dK/dV
        assertEquals(new Volume(3 * 128, 3 * 128 + 4 * 128), ring(4, XQ, XKV, XLSE));
        assertEquals(new Volume(0, 0), ring(1, XQ, XKV, XLSE));
        assertEquals(new Volume(0, 0), ring(1, XQ, XQ, XLSE));
    }

    @Test
    void ulyssesSendsAllButItsOwnShareOfEachTensor() {
        // forward: q 128, k 64, v 64, O 128, LSE 64 = 448, three quarters leave; backward: dO, dQ, dK, dV = 384
        assertEquals(new Volume(336, 288), ulysses(4, XQ, XKV, XLSE));
    }

    @Test
    void attention2dOnTwoByTwoGridMatchesTheHandCount() {
        // forward: transpose 2*64, row gather of q 128, row reduce-scatter of (O, LSE) 192, column gathers 2*64;
        // backward: row gathers of q, O, dO 3*128 and LSE 64, column gathers 2*64, row reduce-scatter of dQ 128,
        // column reduce-scatters 2*64, transpose back 2*64
        assertEquals(new Volume(128 + 128 + 192 + 128, 384 + 64 + 128 + 128 + 128 + 128),
                Attention2DAlgorithm.volume(new ProcessorGrid(2, 2), 1, new ShardBytes(XQ, XKV, XLSE, 0)));
        // p(r, r) keeps its K/V in the transpose (rank 0 here; rank 1 sends its shard): 2 X_kv less each way
        assertEquals(new Volume(448, 832), Attention2DAlgorithm.volume(new ProcessorGrid(2, 2), 0,
                new ShardBytes(XQ, XKV, XLSE, 0)));
    }

    @Test
    void wallFacerWithTeamsOfTwoOnEightWorkersMatchesTheHandCount() {
        // C = 2, R = 2, team K/V block 2 C X_kv = 256, team query bundle C (2 X_q + 2 X_lse) = 768, team dQ
        // C X_q = 256. Member 1 forward: gathers of q, k, v 256, first block 256, one ring hop 256, reduce-scatter
        // of (O, LSE) 192: 960. Backward: gathers of q, dO, LSE, Delta, k, v 512, first bundle 768, one bundle hop
        // 768 and one dQ hop 256, dQ home 256, reduce-scatters of dQ, dK, dV 256: 2816.
        assertEquals(new Volume(960, 2816), wallFacer(8, 2, 1, XQ, XKV, XLSE));
        // member 0 keeps its team's blocks: no first send either way; its dQ still goes home (R > 1)
        assertEquals(new Volume(704, 2048), wallFacer(8, 2, 0, XQ, XKV, XLSE));
        // P = 4, C = 2: R = 1, no ring hops; member 0 sends no first bundle and its dQ home is itself
        assertEquals(new Volume(448, 768), wallFacer(4, 2, 0, XQ, XKV, XLSE));
        assertEquals(new Volume(704, 1792), wallFacer(4, 2, 1, XQ, XKV, XLSE));
    }

    @Test
    void wallFacerWithTeamsOfOneIsRingAttentionWithTheQueriesTravelling() {
        assertEquals(ring(8, XQ, XQ, XLSE),
                wallFacer(8, 1, 0, XQ, XQ, XLSE));
        // with GQA the ring moves K/V backward instead; WallFacer always moves the queries
        Volume ring = ring(8, XQ, XKV, XLSE);
        Volume wall = wallFacer(8, 1, 0, XQ, XKV, XLSE);
        assertEquals(ring.forward(), wall.forward());
        assertEquals(7 * (3 * XQ + 2 * XLSE) + XQ, wall.backward());
    }

    @Test
    void laspCausalPassesOneStateEachWayAlongTheChain() {
        long state = 64;                                       // B H D^2 w = 1 * 4 * 4 * 4
        assertEquals(new Volume(64, 0), lasp(4, true, 0, state));
        assertEquals(new Volume(64, 64), lasp(4, true, 2, state));
        assertEquals(new Volume(0, 64), lasp(4, true, 3, state));
        assertEquals(new Volume(96, 96), lasp(4, false, 0, state));
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {1, 2, 3, 4, 8, 9, 16, 18, 36, 64})
    void ringAndWallFacerSchedulesAddUpToTheFormulas(int p) {
        for (int kvHeads : new int[] {4, 2}) {                // queries travel backward (H = Hkv), K/V travel (GQA)
            PlanProblem problem = problem(p, 4, kvHeads);
            long xq = problem.xq();
            long xkv = problem.xkv();
            long xlse = problem.xlse();
            AlgorithmModel.Candidate ring = new RingModel().candidates(problem).get(0);
            assertEquals(kvHeads == 4 ? "P=" + p + ", bwd: queries travel" : "P=" + p + ", bwd: K/V travel",
                    ring.config());
            assertSends(p, ring(p, xq, xkv, xlse), ring);
            for (int c = 1; c * c <= p; c++) {
                if (p % (c * c) != 0) {
                    continue;
                }
                int r = p / (c * c);
                for (WallFacerModel.Placement placement : WallFacerModel.Placement.values()) {
                    AlgorithmModel.Candidate cand = WallFacerModel.candidate(problem, c, placement);
                    long[] fwd = new long[p];
                    long[] bwd = new long[p];
                    for (int rank = 0; rank < p; rank++) {
                        int member = placement == WallFacerModel.Placement.TEAMS_IN_NODES ? rank % c : rank / r % c;
                        Volume v = wallFacer(p, c, member, xq, xkv, xlse);
                        fwd[rank] = v.forward();
                        bwd[rank] = v.backward();
                    }
                    String what = "WallFacer P = " + p + ", C = " + c + ", Hkv = " + kvHeads + ", " + placement;
                    assertArrayEquals(fwd, cand.forward().bytesSent(), what + " forward");
                    assertArrayEquals(bwd, cand.backward().bytesSent(), what + " backward");
                }
            }
        }
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {1, 4, 9, 16, 64})
    void attention2dSchedulesOnSquareGridsAddUpToTheFormulas(int p) {
        PlanProblem problem = problem(p, 4);
        int g = (int) Math.round(Math.sqrt(p));
        for (boolean overlap : new boolean[] {false, true}) {
            List<AlgorithmModel.Candidate> cands = new Attention2DModel(overlap).candidates(problem);
            assertEquals(1, cands.size(), "a square grid has one orientation");
            assertEquals(g + " x " + g + " grid", cands.get(0).config());
            assertGridSends(new ProcessorGrid(g, g), problem, cands.get(0), overlap);
        }
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {2, 3, 6, 8, 12, 18})
    void attention2dSchedulesOnRectangularGridsAddUpToTheFormulas(int p) {
        PlanProblem problem = problem(p, 2);
        ProcessorGrid grid = ProcessorGrid.forWorkers(p);
        ProcessorGrid transposed = new ProcessorGrid(grid.columns(), grid.rows());
        for (boolean overlap : new boolean[] {false, true}) {
            List<AlgorithmModel.Candidate> cands = new Attention2DModel(overlap).candidates(problem);
            assertEquals(2, cands.size(), "both orientations of " + grid);
            assertEquals(grid + " grid", cands.get(0).config(), "attn4j's default grid first");
            assertNull(cands.get(0).note());
            assertEquals(transposed + " grid", cands.get(1).config());
            assertTrue(cands.get(1).note().contains("new ProcessorGrid(" + grid.columns() + ", " + grid.rows() + ")"),
                    cands.get(1).note());
            assertGridSends(grid, problem, cands.get(0), overlap);
            assertGridSends(transposed, problem, cands.get(1), overlap);
        }
    }

    /** The ATTENTION2D schedules send, rank by rank, the grid formula (the transpose unless a rank keeps its shard). */
    private static void assertGridSends(ProcessorGrid grid, PlanProblem problem, AlgorithmModel.Candidate cand,
                                        boolean overlap) {
        int p = grid.size();
        long[] fwd = new long[p];
        long[] bwd = new long[p];
        for (int w = 0; w < p; w++) {
            Volume v = Attention2DAlgorithm.volume(grid, w, new ShardBytes(problem.xq(), problem.xkv(),
                    problem.xlse(), 0));
            fwd[w] = v.forward();
            bwd[w] = v.backward();
        }
        String what = grid + (overlap ? " ATTENTION2D-O " : " ATTENTION2D-NO ");
        assertArrayEquals(fwd, cand.forward().bytesSent(), what + "forward");
        assertArrayEquals(bwd, cand.backward().bytesSent(), what + "backward");
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {1, 2, 4})
    void ulyssesAndLaspSchedulesAddUpToTheFormulas(int p) {
        PlanProblem problem = problem(p, 4);
        assertSends(p, ulysses(p, problem.xq(), problem.xkv(), problem.xlse()),
                new UlyssesModel().candidates(problem).get(0));
        PlanProblem linear = new PlanProblem(problem.cluster(), problem.model(), problem.length(), true, true, 1);
        AlgorithmModel.Candidate chain = new LaspModel().candidates(linear).get(0);
        for (int r = 0; r < p; r++) {
            Volume v = lasp(p, true, r, linear.state());
            assertEquals(v.forward(), chain.forward().bytesSent()[r], "LASP forward, rank " + r);
            assertEquals(v.backward(), chain.backward().bytesSent()[r], "LASP backward, rank " + r);
        }
        PlanProblem nonCausal = new PlanProblem(problem.cluster(), problem.model(), problem.length(), false, true, 1);
        assertSends(p, lasp(p, false, 0, nonCausal.state()),
                new LaspModel().candidates(nonCausal).get(0));
    }

    /**
     * Every listed algorithm's cost model, in its first candidate, charges rank by rank the bytes its descriptor
     * gives, for P = 4 (the options at their defaults) with GQA: a new algorithm's model and formula cannot drift
     * apart.
     */
    @Test
    void everyListedModelChargesItsDescriptorsBytes() {
        int p = 4;
        for (SequenceAlgorithm a : SequenceAlgorithm.all()) {
            PlanProblem problem = new PlanProblem(problem(p, 4).cluster(), problem(p, 4).model(), 4L * p, true,
                    !a.softmax(), 100);
            Map<String, Double> options = a.options().stream().anyMatch(o -> o.name().equals("team"))
                    ? Map.of("team", 2.0) : Map.of();
            AlgorithmModel.Candidate c = a.costModel(options).candidates(problem).get(0);
            SequenceAlgorithm.Settings s = new SequenceAlgorithm.Settings(p, 4 * p, 4, 2, true, 0, null, options);
            ShardBytes x = new ShardBytes(problem.xq(), problem.xkv(), problem.xlse(), problem.state());
            for (int r = 0; r < p; r++) {
                Volume v = a.volume(s, x, r);
                assertEquals(v.forward(), c.forward().bytesSent()[r], a + " forward, rank " + r);
                assertEquals(v.backward(), c.backward().bytesSent()[r], a + " backward, rank " + r);
            }
        }
    }

    /** B 1, H 4, Hkv 2, D 2, 4 bytes, N/P = 4, on {@code p / perNode} nodes (one node if it does not divide). */
    static PlanProblem problem(int p, int perNode) {
        return problem(p, perNode, 2);
    }

    /** As {@link #problem(int, int)} with {@code kvHeads} K/V heads. */
    static PlanProblem problem(int p, int perNode, int kvHeads) {
        int g = p % perNode == 0 ? perNode : p;
        ClusterSpec cluster = new ClusterSpec(p / g, g, 100, 1, 10, 5, 1);
        return new PlanProblem(cluster, new ModelSpec(1, 4, kvHeads, 2, 4, 1), 4L * p, true, false, 100);
    }

    private static void assertSends(int p, Volume v, AlgorithmModel.Candidate c) {
        long[] fwd = new long[p];
        long[] bwd = new long[p];
        Arrays.fill(fwd, v.forward());
        Arrays.fill(bwd, v.backward());
        assertArrayEquals(fwd, c.forward().bytesSent(), c.config() + " forward");
        assertArrayEquals(bwd, c.backward().bytesSent(), c.config() + " backward");
    }
}
