package org.attn4j.distributed.training;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Function;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.layers.SequenceParallel;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The {@link SequenceParallel.Context} of one worker for sequences of one length: its positions in its sequence
 * group's layout, and the group's algorithms, one instance per mask setting, shared by all layers with that
 * setting (so their collective calls keep one count).
 */
final class SequenceShardContext implements SequenceParallel.Context {

    private final Transport group;
    private final ParallelStrategy strategy;
    private final SequenceLayout layout;
    private final boolean causalDefault;
    private final int length;
    /** What {@link #rotaryLength()} says: the length, or the whole prompt's when a prefill runs in parts. */
    private int rotaryLength;
    private final int[] positions;
    private final Map<String, SequenceParallelAttention<?>> softmax = new HashMap<>();
    private final Function<INDArray, SequenceParallel.ParameterUse> parameters;

    /**
     * @param job      the job's transport (all W workers)
     * @param members  the world ranks of this worker's sequence group, in sequence order
     * @param strategy the run's strategy
     * @param causal   whether the network's attention is causal (picks the default layout)
     * @param length   N of this batch
     * @param parameters what a layer's {@link #useParameters} does (the trainer's ZeRO stage 3 gathering)
     */
    SequenceShardContext(Transport job, int[] members, ParallelStrategy strategy, boolean causal, int length,
                         Function<INDArray, SequenceParallel.ParameterUse> parameters) {
        this.parameters = parameters;
        this.group = new GroupTransport(job, Group.of(job, members));
        this.strategy = strategy;
        this.layout = strategy.effectiveLayout(causal);
        this.causalDefault = causal;
        this.length = length;
        this.positions = layout.positions(group.rank(), group.worldSize(), length);
    }

    /** The layout the inputs are sharded by. */
    SequenceLayout layout() {
        return layout;
    }

    @Override
    public int length() {
        return length;
    }

    @Override
    public int rotaryLength() {
        return rotaryLength > 0 ? rotaryLength : length;
    }

    /** Makes {@link #rotaryLength()} the whole prompt's length, for the sharded part of a prefill in parts. */
    SequenceShardContext withRotaryLength(int promptLength) {
        this.rotaryLength = promptLength;
        return this;
    }

    @Override
    public int[] positions() {
        return positions.clone();
    }

    @Override
    public SequenceParallelAttention<?> softmax(boolean causal, int window) {
        SequenceAlgorithm algorithm = strategy.algorithm();
        if (!algorithm.softmax()) {
            throw new IllegalStateException("the strategy's algorithm is " + algorithm.name() + ", which is linear "
                    + "attention; a softmax attention layer needs " + SequenceAlgorithm.names(true));
        }
        return softmax.computeIfAbsent(causal + "/" + window, key -> algorithm.create(group,
                strategy.settings(length, causal, window).withLayout(layout)));
    }

    @Override
    public SequenceParallelLinearAttention<?> linear(LinearAttention op, Decay decay, boolean causal) {
        SequenceAlgorithm algorithm = strategy.algorithm().softmax() ? SequenceAlgorithm.linearDefault()
                : strategy.algorithm();
        if (!algorithm.layouts().contains(layout)) {
            throw new IllegalStateException("linear attention runs " + algorithm.name() + ", which needs the "
                    + algorithm.defaultLayout(causal).name().toLowerCase(java.util.Locale.ROOT) + " layout; this run "
                    + "shards sequences " + layout.name().toLowerCase(java.util.Locale.ROOT) + " (set the strategy's "
                    + "layout)");
        }
        // Beside a softmax algorithm the linear layers take their own channels; alone, the algorithm's.
        Channels channels = strategy.algorithm().softmax() ? Channels.LINEAR_LAYERS : Channels.SEQUENCE;
        return algorithm.createLinear(group, channels.take(algorithm.channels()), op, decay, causal);
    }

    @Override
    public SequenceParallel.ParameterUse useParameters(INDArray layerParameters) {
        return parameters.apply(layerParameters);
    }

    @Override
    public String toString() {
        return "SequenceShardContext{" + strategy + ", N=" + length + ", member " + group.rank() + " of "
                + group.worldSize() + ", causal " + causalDefault + "}";
    }
}
