package org.attn4j.samples.plan;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.List;

import org.attn4j.samples.plan.CommunicationFormulas.Volume;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The closed-form volumes against hand-computed values, and the cost model's schedules against the closed forms
 * rank by rank: the model charges the time of exactly the bytes docs/algorithms.md gives.
 */
class PlanFormulasTest {

    // B 1, H 4, Hkv 2, D 2, 4-byte elements, N/P = 4: X_q = 4*4*2*4 = 128, X_kv = 2*4*2*4 = 64, X_lse = 4*4*4 = 64
    private static final long XQ = 128;
    private static final long XKV = 64;
    private static final long XLSE = 64;

    @Test
    void ringSendsPMinusOneKvShardsForwardAndPMoreGradientShardsBackward() {
        assertEquals(new Volume(3 * 128, 3 * 128 + 4 * 128), CommunicationFormulas.ring(4, XKV));
        assertEquals(new Volume(0, 0), CommunicationFormulas.ring(1, XKV));
    }

    @Test
    void ulyssesSendsAllButItsOwnShareOfEachTensor() {
        // forward: q 128, k 64, v 64, O 128, LSE 64 = 448, three quarters leave; backward: dO, dQ, dK, dV = 384
        assertEquals(new Volume(336, 288), CommunicationFormulas.ulysses(4, XQ, XKV, XLSE));
    }

    @Test
    void attention2dOnTwoByTwoGridMatchesTheHandCount() {
        // forward: transpose 2*64, row gather of q 128, row reduce-scatter of (O, LSE) 192, column gathers 2*64;
        // backward: row gathers of q, O, dO 3*128 and LSE 64, column gathers 2*64, row reduce-scatter of dQ 128,
        // column reduce-scatters 2*64, transpose back 2*64
        assertEquals(new Volume(128 + 128 + 192 + 128, 384 + 64 + 128 + 128 + 128 + 128),
                CommunicationFormulas.attention2d(2, 2, true, XQ, XKV, XLSE));
        // p(r, r) keeps its K/V in the transpose: 2 X_kv less each way
        assertEquals(new Volume(448, 832), CommunicationFormulas.attention2d(2, 2, false, XQ, XKV, XLSE));
    }

    @Test
    void wallFacerWithTeamsOfTwoOnEightWorkersMatchesTheHandCount() {
        // C = 2, R = 2, team block 2 C X_kv = 256. Member 1 forward: gathers q, k, v 256, placement 256,
        // one ring hop 256, reduce-scatter of (O, LSE) 192: 960. Backward: gathers of q, O, LSE, dO, k, v 576,
        // placement 256, one K/V hop 256, two dK/dV hops 512, home 256, reduce-scatters of dQ, dK, dV 256: 2112.
        assertEquals(new Volume(960, 2112), CommunicationFormulas.wallFacer(8, 2, 1, XQ, XKV, XLSE));
        // member 0 keeps its team's block at home: no placement send, no hop home
        assertEquals(new Volume(704, 1600), CommunicationFormulas.wallFacer(8, 2, 0, XQ, XKV, XLSE));
        assertEquals(CommunicationFormulas.ring(8, XKV), CommunicationFormulas.wallFacer(8, 1, 0, XQ, XKV, XLSE));
    }

    @Test
    void laspCausalPassesOneStateEachWayAlongTheChain() {
        long state = 64;                                       // B H D^2 w = 1 * 4 * 4 * 4
        assertEquals(new Volume(64, 0), CommunicationFormulas.laspCausal(4, 0, state));
        assertEquals(new Volume(64, 64), CommunicationFormulas.laspCausal(4, 2, state));
        assertEquals(new Volume(0, 64), CommunicationFormulas.laspCausal(4, 3, state));
        assertEquals(new Volume(96, 96), CommunicationFormulas.laspAllReduce(4, state));
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {1, 2, 3, 4, 8, 9, 16, 18, 36, 64})
    void ringAndWallFacerSchedulesAddUpToTheFormulas(int p) {
        PlanProblem problem = problem(p, 4);
        List<AlgorithmModel.Candidate> ring = new RingModel().candidates(problem);
        assertSends(p, CommunicationFormulas.ring(p, problem.xkv()), ring.get(0));
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
                    Volume v = CommunicationFormulas.wallFacer(p, c, member, problem.xq(), problem.xkv(),
                            problem.xlse());
                    fwd[rank] = v.forward();
                    bwd[rank] = v.backward();
                }
                String what = "WallFacer P = " + p + ", C = " + c + ", " + placement;
                assertArrayEquals(fwd, cand.forward().bytesSent(), what + " forward");
                assertArrayEquals(bwd, cand.backward().bytesSent(), what + " backward");
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
            long[] fwd = new long[p];
            long[] bwd = new long[p];
            for (int w = 0; w < p; w++) {
                Volume v = CommunicationFormulas.attention2d(g, g, w % g != w / g, problem.xq(), problem.xkv(),
                        problem.xlse());
                fwd[w] = v.forward();
                bwd[w] = v.backward();
            }
            assertArrayEquals(fwd, cands.get(0).forward().bytesSent(), "overlap " + overlap + " forward");
            assertArrayEquals(bwd, cands.get(0).backward().bytesSent(), "overlap " + overlap + " backward");
        }
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {2, 6, 8, 12, 18})
    void attention2dSchedulesOnRectangularGridsAddUpToTheFormulas(int p) {
        PlanProblem problem = problem(p, 2);
        int a = Attention2DModel.mostSquareRows(p);
        for (boolean overlap : new boolean[] {false, true}) {
            for (AlgorithmModel.Candidate cand : new Attention2DModel(overlap).candidates(problem)) {
                String[] shape = cand.config().replace(" grid", "").split(" x ");
                int rows = Integer.parseInt(shape[0]);
                int cols = Integer.parseInt(shape[1]);
                assertEquals(p, rows * cols, cand.config());
                assertEquals(a, Math.min(rows, cols), cand.config() + ": the most square factorisation");
                // ranks 0 and P-1 keep their K/V in the transpose; on a grid of one row or column every rank does
                Volume stays = CommunicationFormulas.attention2d(rows, cols, false, problem.xq(), problem.xkv(),
                        problem.xlse());
                Volume moves = CommunicationFormulas.attention2d(rows, cols, true, problem.xq(), problem.xkv(),
                        problem.xlse());
                for (Schedule s : new Schedule[] {cand.forward(), cand.backward()}) {
                    boolean forward = s == cand.forward();
                    long[] b = s.bytesSent();
                    String what = cand.config() + (overlap ? " O " : " NO ") + (forward ? "forward" : "backward");
                    assertEquals(forward ? stays.forward() : stays.backward(), b[0], what + ", rank 0");
                    assertEquals(forward ? stays.forward() : stays.backward(), b[p - 1], what + ", rank P-1");
                    Volume busiest = rows > 1 && cols > 1 ? moves : stays;
                    assertEquals(forward ? busiest.forward() : busiest.backward(),
                            Arrays.stream(b).max().orElseThrow(), what + ", busiest rank");
                }
            }
        }
    }

    @ParameterizedTest(name = "P = {0}")
    @ValueSource(ints = {1, 2, 4})
    void ulyssesAndLaspSchedulesAddUpToTheFormulas(int p) {
        PlanProblem problem = problem(p, 4);
        assertSends(p, CommunicationFormulas.ulysses(p, problem.xq(), problem.xkv(), problem.xlse()),
                new UlyssesModel().candidates(problem).get(0));
        PlanProblem linear = new PlanProblem(problem.cluster(), problem.model(), problem.length(), true, true, 1);
        AlgorithmModel.Candidate chain = new LaspModel().candidates(linear).get(0);
        for (int r = 0; r < p; r++) {
            Volume v = CommunicationFormulas.laspCausal(p, r, linear.state());
            assertEquals(v.forward(), chain.forward().bytesSent()[r], "LASP forward, rank " + r);
            assertEquals(v.backward(), chain.backward().bytesSent()[r], "LASP backward, rank " + r);
        }
        PlanProblem nonCausal = new PlanProblem(problem.cluster(), problem.model(), problem.length(), false, true, 1);
        assertSends(p, CommunicationFormulas.laspAllReduce(p, nonCausal.state()),
                new LaspModel().candidates(nonCausal).get(0));
    }

    /** B 1, H 4, Hkv 2, D 2, 4 bytes, N/P = 4, on {@code p / perNode} nodes (one node if it does not divide). */
    static PlanProblem problem(int p, int perNode) {
        int g = p % perNode == 0 ? perNode : p;
        ClusterSpec cluster = new ClusterSpec(p / g, g, 100, 1, 10, 5, 1);
        return new PlanProblem(cluster, new ModelSpec(1, 4, 2, 2, 4, 1), 4L * p, true, false, 100);
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
