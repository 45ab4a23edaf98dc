package org.attn4j.distributed.sequence;

import java.util.List;
import java.util.Map;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.WallFacerModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;

/** The descriptor of {@link WallFacerAttention}: any layout (zigzag by default when causal), a team size C. */
public final class WallFacerAlgorithm extends SequenceAlgorithm {

    /** The team size C (replication factor); {@code C^2} must divide P. */
    public static final String TEAM = "team";

    @Override
    public String name() {
        return "wallfacer";
    }

    @Override
    public String source() {
        return "WallFacer (Liu et al. 2024), sections 3.2-3.4, algorithms 1 and 2";
    }

    @Override
    public String description() {
        return "WallFacer multi-ring attention: teams of C replicate K/V, P/C^2 rings (--team C)";
    }

    @Override
    public List<Option> options() {
        return List.of(new Option(TEAM, "team size C; C^2 must divide P (default: the largest such C)", true));
    }

    /** The team size by default: the largest C with {@code C^2} dividing P. */
    @Override
    public double defaultOption(String name, int workers) {
        if (!name.equals(TEAM)) {
            return super.defaultOption(name, workers);
        }
        int team = 1;
        for (int c = 1; (long) c * c <= workers; c++) {
            if (workers % (c * c) == 0) {
                team = c;
            }
        }
        return team;
    }

    @Override
    protected void check(Settings s) {
        int c = team(s);
        if (c < 1 || s.workers() % (c * c) != 0) {
            throw new IllegalArgumentException(name() + ": team size C = " + c + " with P = " + s.workers()
                    + " workers; C^2 must divide P");
        }
    }

    private int team(Settings s) {
        return (int) option(s, TEAM);
    }

    @Override
    public int channels() {
        return 2;
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        return new WallFacerAttention(transport, channels, team(s), layout(s), s.length(), s.causal(), s.window());
    }

    /**
     * For team member {@code local = rank mod C}, {@code R = P / C^2}:
     * <pre>
     *   forward   (C-1)(X_q + 2 X_kv) + [local != 0] 2C X_kv + (R-1) 2C X_kv + (C-1)(X_q + X_lse)
     *   backward  (C-1)(2 X_q + 2 X_lse + 2 X_kv) + [local != 0] C (2 X_q + 2 X_lse) + (R-1) C (3 X_q + 2 X_lse)
     *             + [local != 0 or R > 1] C X_q + (C-1)(X_q + 2 X_kv)
     * </pre>
     * (team all-gathers, the first block to the sub-ring, the ring hops, dQ home, team reduce-scatters).
     */
    @Override
    public Volume volume(Settings s, ShardBytes x, int rank) {
        int c = team(s);
        long r = s.workers() / ((long) c * c);
        int local = rank % c;
        long first = local != 0 ? 1 : 0;
        long bundle = 2 * x.q() + 2 * x.lse();
        long forward = (c - 1) * (x.q() + 2 * x.kv()) + (first + r - 1) * 2 * c * x.kv() + (c - 1) * (x.q() + x.lse());
        long backward = (c - 1) * (bundle + 2 * x.kv()) + first * c * bundle + (r - 1) * c * (bundle + x.q())
                + (local != 0 || r > 1 ? c * x.q() : 0) + (c - 1) * (x.q() + 2 * x.kv());
        return new Volume(forward, backward);
    }

    @Override
    public String configuration(Settings s) {
        return "C=" + team(s);
    }

    /** Prices the given team size, or every C whose square divides P when none is given. */
    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        Double team = options.get(TEAM);
        return new WallFacerModel(team == null ? 0 : team.intValue());
    }
}
