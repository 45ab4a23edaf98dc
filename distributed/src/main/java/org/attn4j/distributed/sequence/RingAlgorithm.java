package org.attn4j.distributed.sequence;

import java.util.Map;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.RingModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;

/** The descriptor of {@link RingAttention}: any layout (zigzag by default when causal), one channel. */
public final class RingAlgorithm extends SequenceAlgorithm {

    @Override
    public String name() {
        return "ring";
    }

    @Override
    public String source() {
        return "BurstAttention (Sun et al. 2024), section 3, algorithms 1 and 2";
    }

    @Override
    public String description() {
        return "ring attention (BurstAttention): K/V shards travel around the ring";
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        return new RingAttention(channels.world(transport, 0), layout(s), s.length(), s.causal(), s.window());
    }

    /**
     * Forward {@code (P-1) 2 X_kv}; backward {@code (P-1)(3 X_q + 2 X_lse) + X_q} when the queries travel, else
     * {@code (P-1) 2 X_kv + P 2 X_kv} ({@link RingAttention}); nothing for P = 1.
     */
    @Override
    public Volume volume(Settings s, ShardBytes x, int rank) {
        int p = s.workers();
        if (p == 1) {
            return new Volume(0, 0);
        }
        // RingAttention.queriesTravel's test, 3 H D + 2 H <= 4 Hkv D, times B (N/P) w.
        boolean queriesTravel = 3 * x.q() + 2 * x.lse() <= 4 * x.kv();
        long backward = queriesTravel ? (p - 1) * (3 * x.q() + 2 * x.lse()) + x.q()
                : (p - 1) * 2 * x.kv() + p * 2 * x.kv();
        return new Volume((p - 1) * 2 * x.kv(), backward);
    }

    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        return new RingModel();
    }
}
