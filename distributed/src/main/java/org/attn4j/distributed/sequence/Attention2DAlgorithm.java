package org.attn4j.distributed.sequence;

import java.util.Map;
import java.util.Set;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.plan.Attention2DModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;

/**
 * The descriptor of {@link Attention2D} (ATTENTION2D-NO): the striped layout on the most square grid of the
 * workers ({@link ProcessorGrid#forWorkers}), three channels (the world for the K/V transpose, rows, columns).
 */
public class Attention2DAlgorithm extends SequenceAlgorithm {

    @Override
    public String name() {
        return "attention2d";
    }

    @Override
    public String source() {
        return "ATTENTION2D (Elango et al. 2025), section 3, ATTENTION2D-NO";
    }

    @Override
    public String description() {
        return "ATTENTION2D (non-overlapping): queries along grid rows, keys along grid columns";
    }

    @Override
    public SequenceLayout defaultLayout(boolean causal) {
        return SequenceLayout.STRIPED;
    }

    @Override
    public Set<SequenceLayout> layouts() {
        return Set.of(SequenceLayout.STRIPED);
    }

    @Override
    protected String layoutReason() {
        return "the cyclic distribution of section 3.2";
    }

    @Override
    public int channels() {
        return 3;
    }

    @Override
    protected SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s) {
        return new Attention2D(transport, channels, ProcessorGrid.forWorkers(s.workers()), s.length(), s.causal(),
                s.window());
    }

    /**
     * On its {@code rows x cols} grid: forward {@code [moves] 2 X_kv + (cols-1)(2 X_q + X_lse) + (rows-1) 2 X_kv},
     * backward {@code (cols-1)(4 X_q + X_lse) + (rows-1) 4 X_kv + [moves] 2 X_kv}, where {@code moves} says whether
     * the rank's K/V shard leaves it in the transpose (on a square grid, every rank off the diagonal).
     */
    @Override
    public Volume volume(Settings s, ShardBytes x, int rank) {
        return volume(ProcessorGrid.forWorkers(s.workers()), rank, x);
    }

    /** The bytes of {@link #volume(Settings, ShardBytes, int)} on any grid (both variants send the same). */
    public static Volume volume(ProcessorGrid grid, int rank, ShardBytes x) {
        boolean moves = grid.keyShard(grid.row(rank), grid.column(rank)) != rank;
        long transpose = moves ? 2 * x.kv() : 0;
        long forward = transpose + (grid.columns() - 1) * (2 * x.q() + x.lse()) + (grid.rows() - 1) * 2 * x.kv();
        long backward = (grid.columns() - 1) * (4 * x.q() + x.lse()) + (grid.rows() - 1) * 4 * x.kv() + transpose;
        return new Volume(forward, backward);
    }

    @Override
    public String configuration(Settings s) {
        return ProcessorGrid.forWorkers(s.workers()) + " grid";
    }

    @Override
    public AlgorithmModel costModel(Map<String, Double> options) {
        return new Attention2DModel(false);
    }
}
