package org.attn4j.distributed.sequence;

import java.util.Map;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.Attention2DModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;

/** The descriptor of {@link Attention2DOverlap} (ATTENTION2D-O): as ATTENTION2D-NO, the same bytes, overlapped. */
public final class Attention2DOverlapAlgorithm extends Attention2DAlgorithm {

    @Override
    public String name() {
        return "attention2d-overlap";
    }

    @Override
    public String source() {
        return "ATTENTION2D (Elango et al. 2025), section 3, ATTENTION2D-O";
    }

    @Override
    public String description() {
        return "ATTENTION2D with its communication overlapped with computation";
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        return new Attention2DOverlap(transport, channels, ProcessorGrid.forWorkers(s.workers()), s.length(),
                s.causal(), s.window());
    }

    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        return new Attention2DModel(true);
    }
}
