package org.attn4j.distributed.sequence;

import java.util.List;
import java.util.Map;
import java.util.Set;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.LaspModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;

/** The descriptor of {@link LaspAttention}: linear attention, the contiguous layout, an optional decay. */
public final class LaspAlgorithm extends SequenceAlgorithm {

    /** The decay rate lambda in (0, 1] (causal only; 1 = none). */
    public static final String DECAY = "decay";

    @Override
    public String name() {
        return "lasp";
    }

    @Override
    public String source() {
        return "LASP (Sun et al. 2024), section 2, algorithms 2 and 3";
    }

    @Override
    public String description() {
        return "LASP linear attention: the D x D state travels along the chain";
    }

    @Override
    public boolean softmax() {
        return false;
    }

    @Override
    public List<Option> options() {
        return List.of(new Option(DECAY, "decay rate lambda in (0, 1] of causal linear attention (1: none)", false));
    }

    @Override
    public double defaultOption(String name, int workers) {
        if (name.equals(DECAY)) {
            return 1.0;
        }
        return super.defaultOption(name, workers);
    }

    @Override
    public SequenceLayout defaultLayout(boolean causal) {
        return SequenceLayout.CONTIGUOUS;
    }

    @Override
    public Set<SequenceLayout> layouts() {
        return Set.of(SequenceLayout.CONTIGUOUS);
    }

    @Override
    protected String layoutReason() {
        return "the chain of algorithm 2";
    }

    @Override
    protected void check(Settings s) {
        double decay = option(s, DECAY);
        if (!(decay > 0 && decay <= 1)) {
            throw new IllegalArgumentException(name() + ": decay must be in (0, 1], got " + decay);
        }
        if (!s.causal() && decay != 1) {
            throw new IllegalArgumentException(name() + ": non-causal linear attention has no decay, got " + decay);
        }
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        double decay = option(s, DECAY);
        return new LaspAttention(channels.world(transport, 0), s.causal() ? Decay.of(decay) : Decay.none(),
                s.causal());
    }

    @Override
    public SequenceParallelLinearAttention<?> createLinear(Transport transport, Channels channels, LinearAttention op,
                                                           Decay decay, boolean causal) {
        return new LaspAttention(channels.world(transport, 0), decay, causal, op);
    }

    /**
     * Causal: one state {@code B H D D w} forward to the next rank (all but the last) and one back (all but the
     * first); non-causal: a ring all-reduce of the state each way, {@code 2 (P-1) state / P}.
     */
    @Override
    public Volume volume(Settings s, ShardBytes x, int rank) {
        int p = s.workers();
        if (s.causal()) {
            return new Volume(rank < p - 1 ? x.state() : 0, rank > 0 ? x.state() : 0);
        }
        long v = 2L * (p - 1) * (x.state() / p);
        return new Volume(v, v);
    }

    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        return new LaspModel();
    }
}
