package org.attn4j.distributed.training;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;

/**
 * How a training run splits its work over {@code W = dataParallel x sequenceParallel} workers: rank {@code r} is
 * member {@code r mod S} of sequence group {@code r / S} (consecutive ranks, so a group can sit on one node), and
 * sequence group {@code d} trains on the {@code d}-th slice of every batch. Inside a group, every sequence is
 * split by {@link #layout} and the attention layers run {@link #algorithm}; linear attention layers always run
 * LASP, which needs the contiguous layout.
 *
 * @param dataParallel     D, the number of sequence groups (data-parallel size), dividing the batch size
 * @param sequenceParallel S, workers per sequence group
 * @param algorithm        the softmax attention algorithm of the groups
 * @param layout           which positions each member holds; null for the algorithm's default
 * @param team             WallFacer's team size C (1 for the others)
 * @param zero             the ZeRO stage, over all W workers
 */
public record ParallelStrategy(int dataParallel, int sequenceParallel, SequenceAlgorithm algorithm,
                               SequenceLayout layout, int team, ZeroStage zero) {

    /**
     * @throws IllegalArgumentException for sizes below 1 or a team size used with another algorithm
     */
    public ParallelStrategy {
        if (dataParallel < 1 || sequenceParallel < 1) {
            throw new IllegalArgumentException("ParallelStrategy: data-parallel size " + dataParallel
                    + " and sequence-parallel size " + sequenceParallel + " must both be >= 1");
        }
        if (algorithm == null || zero == null) {
            throw new IllegalArgumentException("ParallelStrategy: algorithm and ZeRO stage must be given");
        }
        if (team != 1 && algorithm != SequenceAlgorithm.WALLFACER) {
            throw new IllegalArgumentException("ParallelStrategy: team size " + team + " applies to wallfacer only");
        }
    }

    /** S workers per sequence, one data-parallel group, no ZeRO. */
    public static ParallelStrategy sequence(SequenceAlgorithm algorithm, int sequenceParallel) {
        return new ParallelStrategy(1, sequenceParallel, algorithm, null, 1, ZeroStage.NONE);
    }

    /** This strategy with D data-parallel groups. */
    public ParallelStrategy withDataParallel(int d) {
        return new ParallelStrategy(d, sequenceParallel, algorithm, layout, team, zero);
    }

    /** This strategy with a ZeRO stage. */
    public ParallelStrategy withZero(ZeroStage z) {
        return new ParallelStrategy(dataParallel, sequenceParallel, algorithm, layout, team, z);
    }

    /** This strategy with a sequence layout. */
    public ParallelStrategy withLayout(SequenceLayout l) {
        return new ParallelStrategy(dataParallel, sequenceParallel, algorithm, l, team, zero);
    }

    /** This strategy with WallFacer's team size. */
    public ParallelStrategy withTeam(int c) {
        return new ParallelStrategy(dataParallel, sequenceParallel, algorithm, layout, c, zero);
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
        return "(DP " + dataParallel + ", SP " + sequenceParallel + ") " + algorithm.cliName()
                + (team > 1 ? " C=" + team : "") + (layout != null ? " " + layout : "") + " ZeRO-" + zero.stage();
    }
}
