package org.attn4j.distributed.training;

import java.util.LinkedHashMap;
import java.util.Map;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;

/**
 * How a training run splits its work over {@code W = dataParallel x sequenceParallel} workers: rank {@code r} is
 * member {@code r mod S} of sequence group {@code r / S} (consecutive ranks, so a group can sit on one node), and
 * sequence group {@code d} trains on the {@code d}-th slice of every batch. Inside a group, every sequence is
 * split by {@link #layout} and the attention layers run {@link #algorithm}; linear attention layers beside a
 * softmax algorithm run {@link SequenceAlgorithm#linearDefault()} (LASP, which needs the contiguous layout).
 *
 * @param dataParallel     D, the number of sequence groups (data-parallel size), dividing the batch size
 * @param sequenceParallel S, workers per sequence group
 * @param algorithm        the softmax attention algorithm of the groups
 * @param layout           which positions each member holds; null for the algorithm's default
 * @param options          the algorithm's own options ({@link SequenceAlgorithm#options()}), e.g. WallFacer's team
 *                         size; missing ones take their defaults
 * @param zero             the ZeRO stage, over all W workers
 */
public record ParallelStrategy(int dataParallel, int sequenceParallel, SequenceAlgorithm algorithm,
                               SequenceLayout layout, Map<String, Double> options, ZeroStage zero) {

    /**
     * @throws IllegalArgumentException for sizes below 1 or an option the algorithm does not take
     */
    public ParallelStrategy {
        if (dataParallel < 1 || sequenceParallel < 1) {
            throw new IllegalArgumentException("ParallelStrategy: data-parallel size " + dataParallel
                    + " and sequence-parallel size " + sequenceParallel + " must both be >= 1");
        }
        if (algorithm == null || zero == null) {
            throw new IllegalArgumentException("ParallelStrategy: algorithm and ZeRO stage must be given");
        }
        options = Map.copyOf(options == null ? Map.of() : options);
        for (String name : options.keySet()) {
            if (algorithm.options().stream().noneMatch(o -> o.name().equals(name))) {
                throw new IllegalArgumentException("ParallelStrategy: " + algorithm.name() + " takes no option '" + name
                        + "'");
            }
        }
    }

    /** S workers per sequence, one data-parallel group, no ZeRO. */
    public static ParallelStrategy sequence(SequenceAlgorithm algorithm, int sequenceParallel) {
        return new ParallelStrategy(1, sequenceParallel, algorithm, null, Map.of(), ZeroStage.NONE);
    }

    /**
     * S workers per sequence running the algorithm of that name ({@link SequenceAlgorithm#byName}), one
     * data-parallel group, no ZeRO.
     */
    public static ParallelStrategy sequence(String algorithm, int sequenceParallel) {
        return sequence(SequenceAlgorithm.byName(algorithm), sequenceParallel);
    }

    /** This strategy with D data-parallel groups. */
    public ParallelStrategy withDataParallel(int d) {
        return new ParallelStrategy(d, sequenceParallel, algorithm, layout, options, zero);
    }

    /** This strategy with a ZeRO stage. */
    public ParallelStrategy withZero(ZeroStage z) {
        return new ParallelStrategy(dataParallel, sequenceParallel, algorithm, layout, options, z);
    }

    /** This strategy with a sequence layout. */
    public ParallelStrategy withLayout(SequenceLayout l) {
        return new ParallelStrategy(dataParallel, sequenceParallel, algorithm, l, options, zero);
    }

    /** This strategy with one of the algorithm's options (e.g. WallFacer's {@code team}). */
    public ParallelStrategy withOption(String name, double value) {
        Map<String, Double> o = new LinkedHashMap<>(options);
        o.put(name, value);
        return new ParallelStrategy(dataParallel, sequenceParallel, algorithm, layout, o, zero);
    }

    /** The settings of a sequence group's algorithm for sequences of N positions. */
    public SequenceAlgorithm.Settings settings(int length, boolean causal, int window) {
        return new SequenceAlgorithm.Settings(sequenceParallel, length, 0, 0, causal, window, effectiveLayout(causal),
                options);
    }

    /** W, the number of workers. */
    public int worldSize() {
        return dataParallel * sequenceParallel;
    }

    /** The layout the sequence groups use. */
    public SequenceLayout effectiveLayout(boolean causal) {
        return layout != null ? layout : algorithm.defaultLayout(causal);
    }

    @Override
    public String toString() {
        return "(DP " + dataParallel + ", SP " + sequenceParallel + ") " + algorithm.name()
                + (options.isEmpty() ? "" : " " + options) + (layout != null ? " " + layout : "") + " ZeRO-"
                + zero.stage();
    }
}
