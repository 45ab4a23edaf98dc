package org.attn4j.distributed.plan;

import java.util.ArrayList;
import java.util.List;

/**
 * WallFacer multi-ring attention (WallFacer, section 3.2, algorithm 1; attn4j's {@code WallFacerAttention}):
 * teams of C ranks, {@code C^2 | P}; team {@code t} is place {@code t mod R} of team group {@code t / R},
 * {@code R = P / C^2}. Forward: team all-gathers of q, k, v; member {@code l} sends its team's K/V
 * ({@code 2 C X_kv}) to its first sub-ring position (none for {@code l = 0}); {@code R} ring steps, each
 * computing one block while the next travels; team reduce-scatter of (O, LSE). Backward (section 3.2.1, as attn4j
 * runs it): team all-gathers of q, dO, LSE, Delta, k, v; K/V stay; member {@code l} sends its team's query bundle
 * (q, dO, LSE, Delta: {@code C (2 X_q + 2 X_lse)}) to the rank its first K/V block came from (none for
 * {@code l = 0}); R ring steps, the next bundle travelling ahead of the compute and the dQ accumulator
 * ({@code C X_q}) one step behind it; the last dQ home; team reduce-scatters of dQ, dK, dV.
 *
 * <p>The topology scheduler (section 3.4, equation 8) tries every C with {@code C^2 | P} and both placements:
 * teams on consecutive ranks (team collectives inside a node when C divides the node; what attn4j runs) or
 * sub-rings on consecutive ranks (ring hops inside a node).
 */
public final class WallFacerModel implements AlgorithmModel {

    private final int teamSize;

    /** @param teamSize the one team size C to price, or 0 to search every C with {@code C^2 | P} */
    public WallFacerModel(int teamSize) {
        this.teamSize = teamSize;
    }

    /** Where the logical (team, member) grid lands on node-major ranks. */
    enum Placement {
        /** Rank {@code t C + l}: team members adjacent (attn4j's layout, the paper's "Collect_intra"). */
        TEAMS_IN_NODES("teams in nodes"),
        /** Sub-ring members adjacent (the paper's "P2P_intra"). */
        RINGS_IN_NODES("rings in nodes");

        private final String label;

        Placement(String label) {
            this.label = label;
        }
    }

    @Override
    public String name() {
        return "wallfacer";
    }

    @Override
    public String source() {
        return "WallFacer, section 3.2, algorithms 1-3; scheduler section 3.4";
    }

    @Override
    public String unavailable(PlanProblem problem) {
        int p = problem.workers();
        return teamSize == 0 || p % ((long) teamSize * teamSize) == 0 ? null
                : "team size C = " + teamSize + ": C^2 = " + (long) teamSize * teamSize + " does not divide P = " + p;
    }

    @Override
    public List<Candidate> candidates(PlanProblem problem) {
        int p = problem.workers();
        List<Candidate> out = new ArrayList<>();
        for (int c = 1; (long) c * c <= p; c++) {
            if (p % (c * c) != 0 || (teamSize != 0 && c != teamSize)) {
                continue;
            }
            out.add(candidate(problem, c, Placement.TEAMS_IN_NODES));
            if (c > 1 && p / (c * c) > 1) {
                out.add(candidate(problem, c, Placement.RINGS_IN_NODES));
            }
        }
        return out;
    }

    /** The schedules for team size {@code c} and a placement. */
    static Candidate candidate(PlanProblem problem, int c, Placement placement) {
        Layout at = new Layout(problem.workers(), c, placement);
        long xq = problem.xq();
        long xkv = problem.xkv();
        long xlse = problem.xlse();
        long block = 2L * c * xkv;
        int ring = at.ring;
        double forward = problem.forwardSeconds() / ring;
        double backward = problem.backwardSeconds() / ring;
        Round.Flow toPlace = at.flow(block, (t, l) -> at.rank(at.team(at.group(t) - l, at.place(t)), l));
        Round.Flow next = at.flow(block, (t, l) -> at.rank(at.team(at.group(t), at.place(t) + 1), l));

        Schedule fwd = new Schedule(at.p);
        at.teamRing(fwd, xq);
        at.teamRing(fwd, xkv);
        at.teamRing(fwd, xkv);
        fwd.comm(Round.of(toPlace)).ring(ring, forward, next, null, null);
        at.teamRing(fwd, xq + xlse);

        long bundle = (long) c * (2 * xq + 2 * xlse);
        Round.Flow bundleToPlace = at.flow(bundle, (t, l) -> at.rank(at.team(at.group(t) + l, at.place(t)), l));
        Round.Flow nextBundle = at.flow(bundle, (t, l) -> at.rank(at.team(at.group(t), at.place(t) + 1), l));
        Round.Flow nextDq = at.flow((long) c * xq, (t, l) -> at.rank(at.team(at.group(t), at.place(t) + 1), l));
        // after R steps rank (t, l) holds the dQ of the queries of team (g(t) - l, place(t) + 1)
        Round.Flow dqHome = at.flow((long) c * xq,
                (t, l) -> at.rank(at.team(at.group(t) - l, at.place(t) + 1), l));
        Schedule bwd = new Schedule(at.p);
        for (long x : new long[] {xq, xq, xlse, xlse, xkv, xkv}) {
            at.teamRing(bwd, x);
        }
        bwd.comm(Round.of(bundleToPlace)).ring(ring, backward, nextBundle, nextDq, dqHome);
        for (long x : new long[] {xq, xkv, xkv}) {
            at.teamRing(bwd, x);
        }
        String config = c == 1 ? "C=1 (ring)" : "C=" + c + ", " + placement.label;
        String note = placement == Placement.RINGS_IN_NODES
                ? "placement modelled; attn4j places teams on consecutive ranks" : null;
        return new Candidate(config, note, fwd, bwd);
    }

    /** The logical grid of teams and members and its ranks. */
    private static final class Layout {
        final int p;
        final int c;
        final int ring;
        final Placement placement;

        Layout(int p, int c, Placement placement) {
            this.p = p;
            this.c = c;
            this.ring = p / (c * c);
            this.placement = placement;
        }

        int group(int team) {
            return team / ring;
        }

        int place(int team) {
            return team % ring;
        }

        int team(int group, int place) {
            return Math.floorMod(group, c) * ring + Math.floorMod(place, ring);
        }

        int rank(int team, int member) {
            return placement == Placement.TEAMS_IN_NODES ? team * c + member
                    : (group(team) * c + member) * ring + place(team);
        }

        interface Target {
            int rank(int team, int member);
        }

        /** Every (team, member) sends {@code bytes} to {@code target} (to itself: nothing on the wire). */
        Round.Flow flow(long bytes, Target target) {
            int[] to = new int[p];
            for (int t = 0; t < p / c; t++) {
                for (int l = 0; l < c; l++) {
                    to[rank(t, l)] = target.rank(t, l);
                }
            }
            return new Round.Flow(to, bytes);
        }

        /** A ring all-gather or reduce-scatter inside each team: {@code C - 1} rounds of {@code bytes}. */
        void teamRing(Schedule s, long bytes) {
            s.comm(c - 1, Round.of(flow(bytes, (t, l) -> rank(t, (l + 1) % c))));
        }
    }
}
