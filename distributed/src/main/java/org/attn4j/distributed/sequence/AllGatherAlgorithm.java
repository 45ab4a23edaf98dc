package org.attn4j.distributed.sequence;

import java.util.List;
import java.util.Map;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.PlanProblem;
import org.attn4j.distributed.plan.Round;
import org.attn4j.distributed.plan.Schedule;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;

/** The descriptor of {@link AllGatherAttention}: any layout (zigzag by default when causal), one channel. */
public final class AllGatherAlgorithm extends SequenceAlgorithm {

    @Override
    public String name() {
        return "allgather";
    }

    @Override
    public String source() {
        return "The Llama 3 Herd of Models (2024), context parallelism: all-gather K/V, reduce-scatter dK/dV";
    }

    @Override
    public String description() {
        return "all-gather K/V (Llama 3's context parallelism): every rank sees every key";
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        return new AllGatherAttention(channels.world(transport, 0), layout(s), s.length(), s.causal(), s.window());
    }

    /** The ring all-gather of K and V forward, the ring reduce-scatter of dK and dV backward: {@code (P-1) 2 X_kv}. */
    @Override
    public Volume volume(Settings s, ShardBytes x, int rank) {
        long v = (s.workers() - 1) * 2 * x.kv();
        return new Volume(v, v);
    }

    /**
     * Forward: the ring all-gathers of K and V ({@code P-1} steps of {@code 2 X_kv} to the next rank), then the
     * whole compute; backward: the compute, then the ring reduce-scatter of dK and dV (the same steps). Nothing
     * overlaps, as attn4j runs it.
     */
    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        return new AlgorithmModel() {
            @Override
            public String name() {
                return AllGatherAlgorithm.this.name();
            }

            @Override
            public String source() {
                return AllGatherAlgorithm.this.source();
            }

            @Override
            public List<Candidate> candidates(PlanProblem problem) {
                int p = problem.workers();
                Round hop = Round.of(p, 2 * problem.xkv(), r -> (r + 1) % p);
                Schedule forward = new Schedule(p).comm(p - 1, hop).compute(problem.forwardSeconds());
                Schedule backward = new Schedule(p).compute(problem.backwardSeconds()).comm(p - 1, hop);
                return List.of(new Candidate("P=" + p + ", K/V gathered", null, forward, backward));
            }
        };
    }
}
