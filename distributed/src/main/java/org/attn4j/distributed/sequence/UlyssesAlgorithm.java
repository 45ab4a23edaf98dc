package org.attn4j.distributed.sequence;

import java.util.Map;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.UlyssesModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;

/** The descriptor of {@link UlyssesAttention}: any layout (contiguous by default), P dividing H and Hkv. */
public final class UlyssesAlgorithm extends SequenceAlgorithm {

    @Override
    public String name() {
        return "ulysses";
    }

    @Override
    public String source() {
        return "DeepSpeed-Ulysses (Jacobs et al. 2023), the baseline of BurstAttention section 5 and WallFacer section 6";
    }

    @Override
    public String description() {
        return "Ulysses: all-to-all from sequence shards to head shards and back";
    }

    @Override
    public SequenceLayout defaultLayout(boolean causal) {
        return SequenceLayout.CONTIGUOUS;
    }

    @Override
    protected void check(Settings s) {
        if (s.heads() > 0 && (s.heads() % s.workers() != 0 || s.kvHeads() % s.workers() != 0)) {
            throw new IllegalArgumentException(name() + ": P = " + s.workers() + " workers must divide both H = "
                    + s.heads() + " and Hkv = " + s.kvHeads() + " (Ulysses splits heads; its degree is bounded by "
                    + "the K/V heads)");
        }
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        return new UlyssesAttention(channels.world(transport, 0), layout(s), s.length(), s.causal(), s.window());
    }

    /** {@code (P-1)/P (2 X_q + 2 X_kv + X_lse)} forward, {@code (P-1)/P (2 X_q + 2 X_kv)} backward. */
    @Override
    public Volume volume(Settings s, ShardBytes x, int rank) {
        int p = s.workers();
        return new Volume((p - 1) * (2 * x.q() + 2 * x.kv() + x.lse()) / p, (p - 1) * (2 * x.q() + 2 * x.kv()) / p);
    }

    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        return new UlyssesModel();
    }
}
