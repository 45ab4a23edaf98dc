package org.attn4j.distributed.training;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.layers.SequenceParallel;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.api.DataSet;
import org.nd4j.linalg.dataset.api.iterator.DataSetIterator;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.SpecifiedIndex;

/**
 * Trains one worker's replica of a DL4J network sequence- and data-parallel, so that W workers together take the
 * same steps as one process fitting the whole batches ({@code net.fit(batch)}): same scores, same parameters.
 * <pre>
 *   DistributedTrainer t = DistributedTrainer.builder(net, transport)
 *           .strategy(ParallelStrategy.sequence(SequenceAlgorithm.RING, 2).withDataParallel(2)
 *                   .withZero(ZeroStage.GRADIENTS))
 *           .listeners(new ScoreIterationListener(10))
 *           .build();
 *   t.fit(iterator);                          // every worker, each with its own transport rank
 * </pre>
 * One step on a batch of B sequences of length N:
 * <ol>
 *   <li>this worker takes examples {@code [d B/D, (d+1) B/D)} of its sequence group {@code d} and, of those, the
 *       time steps its member index holds in the strategy's layout (features {@code [B, F, N]} or {@code [B, N]},
 *       labels {@code [B, V, N]}, label mask {@code [B, N]});</li>
 *   <li>forward and backward pass of the whole network inside a {@link SequenceParallel} context, so the
 *       attention layers attend over the whole sequence with the other members of the group;</li>
 *   <li>the gradients are summed over all W workers (all-reduce; reduce-scatter from ZeRO stage 2), which is the
 *       sum over every token of every example, and DL4J's division by the minibatch uses the global B;</li>
 *   <li>the DL4J updater is applied to the whole vector (stage 0) or to this worker's slice (stages 1-3, the
 *       optimizer state of the slice only), and the slices are all-gathered.</li>
 * </ol>
 * Scores are DL4J's (loss summed over time steps, divided by examples), summed over the group and averaged over
 * the data-parallel groups: the whole batch's score. The network must start identical on every worker (same
 * seed, or the same saved model). Not thread-safe; every worker calls the same methods with the same batches.
 */
public final class DistributedTrainer {

    /** The communicator channel of the trainer's own collectives (the attention algorithms use lower ones). */
    private static final int CHANNEL = 16;

    private final TrainableNetwork net;
    private final Transport transport;
    private final ParallelStrategy strategy;
    private final boolean causalLayout;
    private final List<TrainingListener> listeners;
    private final Communicator world;
    private final int[] sequenceMembers;
    private final int dataIndex;
    private final int memberIndex;
    private final long paramCount;
    private final long sliceLength;
    private final ShardedUpdater updater;
    private SequenceShardContext context;
    private boolean paramsCurrent = true;
    private double lastScore = Double.NaN;

    private DistributedTrainer(Builder b) {
        this.net = TrainableNetwork.of(b.model);
        this.transport = b.transport;
        this.strategy = b.strategy;
        this.causalLayout = b.causal;
        this.listeners = List.copyOf(b.listeners);
        int w = transport.worldSize();
        if (w != strategy.worldSize()) {
            throw new IllegalArgumentException("DistributedTrainer: the strategy " + strategy + " needs "
                    + strategy.worldSize() + " workers (data-parallel x sequence-parallel), the transport has " + w);
        }
        int s = strategy.sequenceParallel();
        this.dataIndex = transport.rank() / s;
        this.memberIndex = transport.rank() % s;
        this.sequenceMembers = new int[s];
        for (int i = 0; i < s; i++) {
            sequenceMembers[i] = dataIndex * s + i;
        }
        this.world = Communicator.of(transport, Group.world(transport), CHANNEL);
        this.paramCount = net.params().length();
        this.sliceLength = (paramCount + w - 1) / w;
        long from = strategy.zero() == ZeroStage.NONE ? 0 : Math.min(paramCount, transport.rank() * sliceLength);
        long to = strategy.zero() == ZeroStage.NONE ? paramCount : Math.min(paramCount, from + sliceLength);
        this.updater = new ShardedUpdater(net.updater(), from, to, net.params().dataType());
    }

    /**
     * A builder for training {@code model} (a MultiLayerNetwork or a ComputationGraph with one input and one
     * output) as this worker of {@code transport}'s job.
     */
    public static Builder builder(Model model, Transport transport) {
        return new Builder(model, transport);
    }

    /** Builds a {@link DistributedTrainer}. */
    public static final class Builder {
        private final Model model;
        private final Transport transport;
        private ParallelStrategy strategy;
        private boolean causal = true;
        private final List<TrainingListener> listeners = new ArrayList<>();

        private Builder(Model model, Transport transport) {
            this.model = model;
            this.transport = transport;
        }

        /** How the work is split; default: ring attention over all workers, no data parallelism, no ZeRO. */
        public Builder strategy(ParallelStrategy s) {
            this.strategy = s;
            return this;
        }

        /**
         * Whether the network's attention is causal, which picks the default layout (zigzag for causal ring and
         * WallFacer, contiguous otherwise); default true. Ignored when the strategy names a layout.
         */
        public Builder causal(boolean c) {
            this.causal = c;
            return this;
        }

        /** DL4J listeners called after every step on this worker, in addition to the network's own. */
        public Builder listeners(TrainingListener... l) {
            listeners.addAll(Arrays.asList(l));
            return this;
        }

        /**
         * The trainer.
         *
         * @throws IllegalArgumentException if the strategy does not fit the transport, or the network uses
         *                                  something the sharded updater cannot reproduce
         */
        public DistributedTrainer build() {
            if (transport == null) {
                throw new IllegalArgumentException("DistributedTrainer: no transport");
            }
            if (strategy == null) {
                strategy = ParallelStrategy.sequence(org.attn4j.distributed.sequence.SequenceAlgorithm.RING,
                        transport.worldSize());
            }
            return new DistributedTrainer(this);
        }
    }

    /** The strategy of this run. */
    public ParallelStrategy strategy() {
        return strategy;
    }

    /** The whole batch's score of the last step (before its update). */
    public double score() {
        return lastScore;
    }

    /** Bytes of optimizer state this worker holds (falls as 1/W from ZeRO stage 1). */
    public long optimizerStateBytes() {
        return updater.stateBytes();
    }

    /** Bytes of summed gradient this worker receives per step (falls as 1/W from ZeRO stage 2). */
    public long gradientBytes() {
        long elements = strategy.zero().stage() >= 2 ? sliceLength : paramCount;
        return elements * net.params().dataType().width();
    }

    /** One pass over {@code data}, a step per batch; the iterator is reset first if it can be. */
    public void fit(DataSetIterator data) {
        if (data.resetSupported()) {
            data.reset();
        }
        while (data.hasNext()) {
            fit(data.next());
        }
        gatherParameters();
    }

    /**
     * One optimisation step on {@code batch}, the whole batch (every worker passes the same one).
     *
     * @return the whole batch's score before the update
     * @throws IllegalArgumentException if the batch does not split over the workers (batch size not a multiple
     *                                  of the data-parallel size, sequence length not what the layout needs),
     *                                  before any communication
     */
    public double fit(DataSet batch) {
        INDArray features = batch.getFeatures();
        INDArray labels = batch.getLabels();
        if (batch.getFeaturesMaskArray() != null) {
            throw new IllegalArgumentException("DistributedTrainer: feature masks (padding) are not supported "
                    + "sequence-parallel; use whole sequences");
        }
        int b = (int) features.size(0);
        int d = strategy.dataParallel();
        if (b % d != 0) {
            throw new IllegalArgumentException("DistributedTrainer: batch of " + b + " examples does not split over "
                    + d + " data-parallel groups");
        }
        int n = (int) features.size(features.rank() - 1);
        SequenceShardContext ctx = context(n);
        gatherParameters();

        int[] positions = ctx.positions();
        INDArray localFeatures = shard(examples(features, b / d), positions);
        INDArray localLabels = shard(examples(labels, b / d), positions);
        INDArray localMask = batch.getLabelsMaskArray() == null ? null
                : shard(examples(batch.getLabelsMaskArray(), b / d), positions);
        net.setData(localFeatures, localLabels, localMask);
        try (SequenceParallel.Scope s = SequenceParallel.enter(ctx)) {
            net.computeGradientAndScore();
        }

        INDArray partial = Nd4j.scalar(DataType.DOUBLE, net.score()).reshape(1);
        double score = world.allReduce(partial).getDouble(0) / d;
        step(b);
        lastScore = score;
        net.setScore(score);
        int iteration = net.iteration();
        net.setIteration(iteration + 1);
        for (TrainingListener l : net.listeners()) {
            l.iterationDone(net.model(), iteration, net.epoch());
        }
        for (TrainingListener l : listeners) {
            l.iterationDone(net.model(), iteration, net.epoch());
        }
        return score;
    }

    /**
     * Makes every worker's parameter vector whole again (ZeRO stage 3 keeps only its slice current between
     * steps); a no-op for the other stages. Call it on every worker before using the network outside training.
     */
    public void gatherParameters() {
        if (paramsCurrent) {
            return;
        }
        allGatherSlices();
        paramsCurrent = true;
    }

    private void step(int batchSize) {
        int w = transport.worldSize();
        INDArray grad = padded(net.gradients());
        double divisor = net.miniBatch() ? batchSize : 1;
        int iteration = net.iteration();
        int epoch = net.epoch();
        INDArray params = net.params();
        switch (strategy.zero()) {
            case NONE -> {
                INDArray sum = world.allReduce(grad);
                updater.step(sum.get(NDArrayIndex.interval(0, paramCount)), params, iteration, epoch, divisor);
            }
            case OPTIMIZER_STATE -> {
                INDArray sum = world.allReduce(grad);
                updater.step(sum.get(NDArrayIndex.interval(updater.from(), updater.to())), params, iteration, epoch,
                        divisor);
                allGatherSlices();
            }
            case GRADIENTS, PARAMETERS -> {
                INDArray mine = world.reduceScatter(grad.reshape(w, sliceLength)).reshape(sliceLength);
                updater.step(mine.get(NDArrayIndex.interval(0, updater.to() - updater.from())), params, iteration,
                        epoch, divisor);
                if (strategy.zero() == ZeroStage.GRADIENTS) {
                    allGatherSlices();
                } else {
                    paramsCurrent = false;          // gathered just before the next forward pass
                }
            }
            default -> throw new IllegalStateException(strategy.zero().toString());
        }
    }

    /** Every worker's slice of the parameter vector, all-gathered into the network's vector. */
    private void allGatherSlices() {
        INDArray params = net.params();
        INDArray flat = params.reshape(paramCount);
        INDArray mine = Nd4j.zeros(params.dataType(), sliceLength);
        long from = updater.from();
        long to = updater.to();
        if (to > from) {
            mine.get(NDArrayIndex.interval(0, to - from)).assign(flat.get(NDArrayIndex.interval(from, to)));
        }
        List<INDArray> slices = world.allGather(mine);
        for (int r = 0; r < slices.size(); r++) {
            long lo = Math.min(paramCount, r * sliceLength);
            long hi = Math.min(paramCount, lo + sliceLength);
            if (hi > lo) {
                flat.get(NDArrayIndex.interval(lo, hi)).assign(slices.get(r).get(NDArrayIndex.interval(0, hi - lo)));
            }
        }
    }

    /** The flat gradient copied into a vector of W slices. */
    private INDArray padded(INDArray gradient) {
        INDArray out = Nd4j.zeros(gradient.dataType(), transport.worldSize() * sliceLength);
        out.get(NDArrayIndex.interval(0, paramCount)).assign(gradient.reshape(paramCount));
        return out;
    }

    private SequenceShardContext context(int n) {
        if (context == null || context.length() != n) {
            SequenceShardContext c = new SequenceShardContext(transport, sequenceMembers, strategy, causalLayout, n);
            int parts = c.layout() == SequenceLayout.ZIGZAG ? 2 * sequenceMembers.length : sequenceMembers.length;
            if (n % parts != 0) {
                throw new IllegalArgumentException("DistributedTrainer: sequence length " + n + " does not split "
                        + "into " + parts + " equal parts for the " + c.layout() + " layout over "
                        + sequenceMembers.length + " workers");
            }
            context = c;
        }
        return context;
    }

    /** This worker's data-parallel group's examples. */
    private INDArray examples(INDArray a, int perGroup) {
        INDArrayIndex[] idx = all(a.rank());
        idx[0] = NDArrayIndex.interval((long) dataIndex * perGroup, (long) (dataIndex + 1) * perGroup);
        return a.get(idx);
    }

    /** The time steps (last dimension) this worker holds, in its layout order. */
    private static INDArray shard(INDArray a, int[] positions) {
        INDArrayIndex[] idx = all(a.rank());
        long[] p = new long[positions.length];
        for (int i = 0; i < p.length; i++) {
            p[i] = positions[i];
        }
        idx[a.rank() - 1] = new SpecifiedIndex(p);
        return a.get(idx).dup('c');
    }

    private static INDArrayIndex[] all(int rank) {
        INDArrayIndex[] idx = new INDArrayIndex[rank];
        Arrays.fill(idx, NDArrayIndex.all());
        return idx;
    }

    @Override
    public String toString() {
        return "DistributedTrainer{" + strategy + ", rank " + transport.rank() + ", data group " + dataIndex
                + ", member " + memberIndex + "}";
    }
}
