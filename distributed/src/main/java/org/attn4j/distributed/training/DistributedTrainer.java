package org.attn4j.distributed.training;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.distributed.sequence.DocumentAgreement;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.layers.PackedSequences;
import org.attn4j.layers.RowLayerImpl;
import org.attn4j.layers.SequenceParallel;
import org.attn4j.ops.Documents;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.api.Trainable;
import org.deeplearning4j.nn.graph.vertex.GraphVertex;
import org.deeplearning4j.nn.updater.BaseMultiLayerUpdater;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.api.DataSet;
import org.nd4j.linalg.dataset.api.iterator.DataSetIterator;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.SpecifiedIndex;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Trains one worker's replica of a DL4J network sequence- and data-parallel, so that W workers together take the
 * same steps as one process fitting the whole batches ({@code net.fit(batch)}): same scores, same parameters.
 * <pre>
 *   DistributedTrainer t = DistributedTrainer.builder(net, transport)
 *           .strategy(ParallelStrategy.sequence("ring", 2).withDataParallel(2)
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
 *   <li>the gradients are summed over all W workers (all-reduce; reduce-scatter from ZeRO stage 1), which is the
 *       sum over every token of every example, and DL4J's division by the minibatch uses the global B;</li>
 *   <li>the network's DL4J updater configurations are applied to the whole vector (stage 0) or to this worker's
 *       slice (stages 1-3, with the optimizer state of the slice only), and the slices are all-gathered (stage 3:
 *       at the end of a public {@code fit}, and between the steps of an epoch before the next forward pass).
 *       Stages 2 and 3 release the resident pages of what the worker does not own ({@link ZeroStage}).</li>
 * </ol>
 * Every public {@code fit} returns with the network whole and current on every worker at every stage: its
 * {@code output}, evaluation and {@code ModelSerializer} see the trained parameters. Only a step that fails in the
 * middle (a worker lost) leaves them partial; restart from a checkpoint then.
 * Scores are DL4J's (loss summed over time steps, divided by examples), summed over the group and averaged over
 * the data-parallel groups: the whole batch's score. The network must start identical on every worker (same
 * seed, or the same saved model). Not thread-safe; every worker calls the same methods with the same batches.
 */
public final class DistributedTrainer {


    /** Steps between the progress lines rank 0 logs, unless {@link Builder#logEvery} says otherwise. */
    public static final int DEFAULT_LOG_EVERY = 100;
    private static final Logger LOG = LoggerFactory.getLogger(DistributedTrainer.class);

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
    /** First flat parameter index of this worker's slice, and one past its last (ZeRO's partition). */
    private final long sliceFrom;
    private final long sliceTo;
    private final ShardedUpdater updater;
    private SequenceShardContext context;
    /** The parameter vector's slices, gathered and released. */
    private final ShardedParameters shards;
    /** The flat ranges of the layers that gather their own parameters when they run (attn4j's layers). */
    private final List<long[]> selfGathering;
    /** False while other ranks' slices are stale or released (ZeRO stage 3 between steps). */
    private boolean paramsWhole = true;
    /** During this step's passes, attn4j's layers gather their parameters per use (ZeRO stage 3). */
    private boolean gatherPerLayer;
    /** The first flat indices of the self-gathering layers whose parameters are whole and current this step. */
    private final java.util.Set<Long> currentLayers = new java.util.HashSet<>();
    private double lastScore = Double.NaN;
    private final CheckpointStore checkpoints;
    private final int checkpointEvery;
    private final String run;
    private final String fingerprint;
    private long batchesDone;
    private int resumedAt = -1;
    private final int logEvery;
    private final double maxGradientNorm;
    private final boolean perToken;
    private double lastGradientNorm = Double.NaN;
    private long loggedAt = System.nanoTime();
    private long tokensSinceLog;

    private DistributedTrainer(Builder b) {
        this.net = TrainableNetwork.of(b.model);
        this.transport = b.transport;
        this.strategy = b.strategy;
        this.causalLayout = b.causal;
        this.listeners = List.copyOf(b.listeners);
        this.logEvery = b.logEvery;
        this.maxGradientNorm = b.maxGradientNorm;
        this.perToken = b.perToken;
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
        this.world = Channels.TRAINER.world(transport, 0);
        this.paramCount = net.params().length();
        if (paramCount < w) {
            throw new IllegalArgumentException("DistributedTrainer: a network of " + paramCount + " parameters "
                    + "cannot be sliced over " + w + " workers");
        }
        ZeroStage zero = strategy.zero();
        java.util.Optional<String> noRelease = zero.stage() >= 2 ? ResidentPages.unavailable()
                : java.util.Optional.empty();
        if (noRelease.isPresent()) {
            throw new IllegalArgumentException("DistributedTrainer: ZeRO stage " + zero.stage() + " hands unowned "
                    + "gradient" + (zero == ZeroStage.PARAMETERS ? " and parameter" : "") + " pages back to the "
                    + "operating system, which " + noRelease.get() + "; use stage 1 or 0");
        }
        this.shards = new ShardedParameters(net.params(), world);
        this.sliceFrom = shards.start(transport.rank());
        this.sliceTo = shards.start(transport.rank() + 1);
        this.selfGathering = selfGatheringRanges(net.orderedLayers());
        List<ShardedUpdater.Run> runs = ShardedUpdater.runs(net.orderedLayers());
        this.updater = zero == ZeroStage.NONE
                ? new ShardedUpdater(runs, 0, paramCount, net.params().dataType())
                : new ShardedUpdater(runs, sliceFrom, sliceTo, net.params().dataType());
        BaseMultiLayerUpdater<?> existing = net.existingUpdater();
        if (existing != null && !(existing instanceof StatelessUpdater.OfMultiLayer)
                && !(existing instanceof StatelessUpdater.OfGraph)) {
            updater.importFrom(existing);
        }
        net.detachUpdater();
        this.checkpoints = b.checkpointDir == null ? null : new CheckpointStore(b.checkpointDir, b.shardOutput);
        this.checkpointEvery = b.checkpointEvery;
        this.run = b.run;
        this.fingerprint = fingerprint(net.configurationJson(), paramCount);
        if (b.resume) {
            if (checkpoints == null) {
                throw new IllegalArgumentException("DistributedTrainer: resume needs a checkpoint directory");
            }
            restore();
        }
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
        private java.nio.file.Path checkpointDir;
        private int checkpointEvery;
        private String run = "attn4j";
        private boolean resume;
        private int logEvery = DEFAULT_LOG_EVERY;
        private CheckpointStore.ShardOutput shardOutput = CheckpointStore.ShardOutput.WHOLE;
        private double maxGradientNorm;
        private boolean perToken;

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

        /**
         * Sharded checkpoints into {@code dir} every {@code everySteps} steps (see {@link #resume}).
         *
         * @param dir        the checkpoint directory (shared by the workers, e.g. on one machine or a shared disk)
         * @param everySteps how often; the step count is the network's iteration count
         */
        public Builder checkpoints(java.nio.file.Path dir, int everySteps) {
            if (everySteps < 1) {
                throw new IllegalArgumentException("DistributedTrainer: checkpoint interval must be >= 1 step, got "
                        + everySteps);
            }
            this.checkpointDir = dir;
            this.checkpointEvery = everySteps;
            return this;
        }

        /** The run's name, kept in its checkpoints; resuming refuses a checkpoint of another run (default "attn4j"). */
        public Builder run(String name) {
            this.run = name;
            return this;
        }

        /**
         * Whether to continue from the newest complete checkpoint in the checkpoint directory, if there is one:
         * parameters, optimizer state, iteration and epoch, the position in the epoch and the RNG seed.
         */
        public Builder resume(boolean r) {
            this.resume = r;
            return this;
        }

        /** How shards reach their files; the recovery test's worker supplies one that dies half-way. */
        Builder shardOutput(CheckpointStore.ShardOutput o) {
            this.shardOutput = o;
            return this;
        }

        /**
         * Rank 0 logs the step, the loss and the tokens per second at INFO through slf4j every {@code steps}
         * steps (default {@value DistributedTrainer#DEFAULT_LOG_EVERY}); 0 turns it off.
         */
        public Builder logEvery(int steps) {
            if (steps < 0) {
                throw new IllegalArgumentException("DistributedTrainer: logEvery must be >= 0 (0 = off), got "
                        + steps);
            }
            this.logEvery = steps;
            return this;
        }

        /**
         * Clips the gradient by its global norm before every update, as PyTorch's {@code clip_grad_norm_} does: the
         * gradient the updater receives (DL4J's, of the score the trainer reports) is scaled by
         * {@code min(1, maxNorm / (norm + 1e-6))}, its norm taken over every parameter that trains (not those of an
         * {@code Sgd} updater at a rate of zero, which are frozen): over the whole
         * summed vector at ZeRO stage 0, over every worker's slice (one all-reduce of a number) from stage 1, so that
         * every stage and every worker count clips alike. 0 (the default) does not clip.
         */
        public Builder clipGradientNorm(double maxNorm) {
            if (!(maxNorm >= 0) || Double.isInfinite(maxNorm)) {
                throw new IllegalArgumentException("DistributedTrainer: the gradient norm to clip at must be >= 0 "
                        + "(0 = off), got " + maxNorm);
            }
            this.maxGradientNorm = maxNorm;
            return this;
        }

        /**
         * The loss and its gradient as means over the predicted tokens of the whole batch (the ones of the label
         * mask, every position without one), as Hugging Face's causal language models compute them, instead of
         * DL4J's sum over the time steps averaged over the examples: the gradient is divided by the batch's tokens
         * instead of its examples, and the score reported per token. Default false.
         */
        public Builder perTokenLoss(boolean p) {
            this.perToken = p;
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
                strategy = ParallelStrategy.sequence("ring",
                        transport.worldSize());
            }
            return new DistributedTrainer(this);
        }
    }

    /** The strategy of this run. */
    public ParallelStrategy strategy() {
        return strategy;
    }

    /**
     * The global norm of the last step's gradient, before clipping: the gradient the updater receives (divided by
     * the examples as DL4J's updater divides it, or by the tokens with {@link Builder#perTokenLoss}), over every
     * trained parameter of every worker. NaN before the first step.
     */
    public double gradientNorm() {
        return lastGradientNorm;
    }

    /** The whole batch's score of the last step (before its update). */
    public double score() {
        return lastScore;
    }

    /**
     * Bytes of the optimizer state arrays this worker allocated (its slice's from ZeRO stage 1). A count of the
     * arrays, not a reading of memory: the resident bytes are measured by {@code attn4j bench zero}.
     */
    public long optimizerStateBytes() {
        return updater.stateBytes();
    }

    /**
     * Bytes of gradient this worker keeps resident between steps by design: the whole vector up to stage 1, its
     * slice from stage 2 (the backward pass itself writes the whole vector; the rest is released after the
     * reduce-scatter).
     */
    public long gradientBytes() {
        long elements = strategy.zero().stage() >= 2 ? sliceTo - sliceFrom : paramCount;
        return elements * net.params().dataType().width();
    }

    /**
     * Bytes of parameters this worker keeps resident between steps by design: at stage 3 its slice between the
     * steps of {@link #fit(DataSetIterator)} (every public {@code fit} returns with the whole vector), the whole
     * vector otherwise.
     */
    public long currentParameterBytes() {
        long elements = strategy.zero() == ZeroStage.PARAMETERS ? sliceTo - sliceFrom : paramCount;
        return elements * net.params().dataType().width();
    }

    /**
     * One epoch over {@code data}, a step per batch; the iterator is reset first if it can be. Listeners get
     * {@code onEpochStart} and {@code onEpochEnd} (with whole, current parameters) and the network's epoch count
     * advances, as in DL4J's own {@code fit(iterator)}. Between the steps, ZeRO stage 3 keeps only this worker's
     * slice of the parameters resident; when the epoch ends, or a batch is refused, the network is whole again on
     * every worker, ready for {@code output}, evaluation or saving.
     *
     * @throws IllegalArgumentException as {@link #fit(DataSet)}, for a batch that does not split over the workers
     */
    public void fit(DataSetIterator data) {
        if (data.resetSupported()) {
            data.reset();
        }
        if (batchesDone == 0) {
            allListeners().forEach(l -> l.onEpochStart(net.model()));
        }
        for (long skipped = 0; skipped < batchesDone && data.hasNext(); skipped++) {
            data.next();                           // resumed in the middle of the epoch: these are done
        }
        while (data.hasNext()) {
            Part part;
            try {
                part = part(data.next(), true);
            } catch (IllegalArgumentException refused) {
                makeWhole();                       // every worker refuses the same batch, before any step of it
                throw refused;
            }
            train(part, false);
        }
        batchesDone = 0;
        makeWhole();
        allListeners().forEach(l -> l.onEpochEnd(net.model()));
        net.setEpoch(net.epoch() + 1);
    }

    /** The network's own listeners, then the trainer's. */
    private List<TrainingListener> allListeners() {
        List<TrainingListener> all = new ArrayList<>(net.listeners());
        all.addAll(listeners);
        return all;
    }

    /** The step of the checkpoint this trainer resumed from, or -1. */
    public int resumedFromStep() {
        return resumedAt;
    }

    /** Batches of the current epoch already trained on (a resumed run skips them). */
    public long batchesDone() {
        return batchesDone;
    }

    /**
     * One optimisation step on {@code batch}, the whole batch (every worker passes the same one). Packed sequences:
     * the examples' document ids travel as their metadata ({@link Packing#attach}); every worker then attends
     * within documents, and a worker whose ids differ makes every worker fail, naming it. Afterwards the network
     * is whole on every worker at every ZeRO stage, ready for {@code output}, evaluation or saving (stage 3
     * releases the parameter pages this worker does not own within the step, and all-gathers the updated slices
     * at its end).
     *
     * @return the whole batch's score before the update
     * @throws IllegalArgumentException if the batch does not split over the workers (batch size not a multiple
     *                                  of the data-parallel size, sequence length not what the layout needs),
     *                                  before any communication
     */
    public double fit(DataSet batch) {
        return train(part(batch, true), true);
    }

    /**
     * One optimisation step on this worker's data-parallel group's examples only ({@link #dataParallelIndex}): the
     * members of a group pass the same examples, each group its own, all groups as many. For data that each worker
     * reads for its group alone (a partition, a file per group); equal to {@link #fit(DataSet)} on the groups'
     * examples stacked in group order, and as that leaves the network whole.
     *
     * @return the whole batch's score before the update
     */
    public double fitGroup(DataSet groupExamples) {
        return train(part(groupExamples, false), true);
    }

    /** This worker's data-parallel group: which examples of a whole batch it trains on. */
    public int dataParallelIndex() {
        return dataIndex;
    }

    /** A batch checked and cut to this worker's examples and time steps; {@code b} is the whole batch's size. */
    private record Part(INDArray features, INDArray labels, INDArray labelMask, Documents documents, int b,
                        int n, double groupTokens) {
    }

    /** Checks {@code batch} and cuts out this worker's part; moves no parameter. */
    private Part part(DataSet batch, boolean whole) {
        INDArray features = batch.getFeatures();
        INDArray labels = batch.getLabels();
        if (batch.getFeaturesMaskArray() != null) {
            throw new IllegalArgumentException("DistributedTrainer: feature masks (padding) are not supported "
                    + "sequence-parallel; use whole sequences");
        }
        int d = strategy.dataParallel();
        int b = whole ? (int) features.size(0) : (int) features.size(0) * d;
        if (b % d != 0) {
            throw new IllegalArgumentException("DistributedTrainer: batch of " + b + " examples does not split over "
                    + d + " data-parallel groups");
        }
        int n = (int) features.size(features.rank() - 1);
        Documents documents = Packing.of(batch);
        int[] positions = context(n).positions();
        if (transport.worldSize() > 1) {
            // a worker with other ids fails every worker, named; per group when each group passes its own examples
            DocumentAgreement.require(world, documents, whole ? transport.worldSize() : sequenceMembers.length);
        }
        int perGroup = whole ? b / d : 0;                       // 0: the batch is this group's already
        INDArray mask = batch.getLabelsMaskArray() == null ? null
                : shard(examples(batch.getLabelsMaskArray(), perGroup), positions);
        INDArray groupMask = batch.getLabelsMaskArray() == null ? null : examples(batch.getLabelsMaskArray(),
                perGroup);
        double groupTokens = groupMask == null ? (double) (whole ? b / d : features.size(0)) * n
                : groupMask.sumNumber().doubleValue();
        return new Part(shard(examples(features, perGroup), positions), shard(examples(labels, perGroup), positions),
                mask, examples(documents, perGroup), b, n, groupTokens);
    }

    /**
     * One step on this worker's part. {@code leaveWhole}: the network is whole afterwards (a public step);
     * otherwise stage 3 leaves only this worker's slice resident (between the steps of an epoch).
     */
    private double train(Part p, boolean leaveWhole) {
        gatherForStep();
        net.setData(p.features(), p.labels(), p.labelMask());
        try (SequenceParallel.Scope s = SequenceParallel.enter(context(p.n()));
             PackedSequences.Scope packed = PackedSequences.enter(p.documents())) {
            net.computeGradientAndScore();
        } finally {
            gatherPerLayer = false;
        }

        INDArray partial = Nd4j.scalar(DataType.DOUBLE, net.score()).reshape(1);
        double score = world.allReduce(partial).getDouble(0) / strategy.dataParallel();
        double divisor = net.miniBatch() ? p.b() : 1;
        if (perToken) {
            // every member of a group holds the group's examples: the sum over all workers counts each s times
            INDArray t = Nd4j.scalar(DataType.DOUBLE, p.groupTokens()).reshape(1);
            double tokens = world.allReduce(t).getDouble(0) / strategy.sequenceParallel();
            score = score * p.b() / tokens;
            divisor = tokens;
        }
        step(divisor);
        lastScore = score;
        net.setScore(score);
        int iteration = net.iteration();
        net.setIteration(iteration + 1);
        batchesDone++;
        if (checkpoints != null && (iteration + 1) % checkpointEvery == 0) {
            checkpoint(iteration + 1);
        }
        logProgress(iteration + 1, score, (long) p.b() * p.n());
        List<TrainingListener> all = allListeners();
        if (leaveWhole || !all.isEmpty()) {
            makeWhole();                           // listeners see whole, current parameters at every stage
        }
        for (TrainingListener l : all) {
            l.iterationDone(net.model(), iteration, net.epoch());
        }
        if (!leaveWhole && strategy.zero() == ZeroStage.PARAMETERS) {
            releaseUnownedParameters();
        }
        return score;
    }

    /** Every {@link Builder#logEvery} steps, rank 0: step, loss and tokens per second since the last line. */
    private void logProgress(int step, double score, long tokens) {
        tokensSinceLog += tokens;
        if (logEvery == 0 || step % logEvery != 0) {
            return;
        }
        long now = System.nanoTime();
        if (transport.rank() == 0) {
            LOG.info("step {} loss {} ({} tokens/s)", step, String.format(java.util.Locale.ROOT, "%.6g", score),
                    String.format(java.util.Locale.ROOT, "%.0f", tokensSinceLog / ((now - loggedAt) / 1e9)));
        }
        loggedAt = now;
        tokensSinceLog = 0;
    }

    /**
     * Writes this worker's shard of checkpoint {@code step} and, on rank 0 once every shard is in place, the
     * manifest. A worker that dies meanwhile leaves the previous checkpoint the newest complete one, and makes
     * the others fail in the exchange of shard checksums, naming it.
     */
    private void checkpoint(int step) {
        int w = transport.worldSize();
        List<INDArray> arrays = new ArrayList<>();
        arrays.add(shards.slice(net.params(), transport.rank()).dup());
        arrays.addAll(updater.states());
        CheckpointStore.Header h = new CheckpointStore.Header(run, fingerprint, w, strategy.zero().stage(),
                transport.rank(), sliceFrom, sliceTo, net.iteration(), net.epoch(), batchesDone,
                Nd4j.getRandom().getSeed(), step);
        try {
            long[] mine = checkpoints.writeShard(step, h, arrays);
            List<INDArray> all = world.allGather(Nd4j.createFromArray(mine));
            if (transport.rank() == 0) {
                long[][] shards = new long[w][];
                for (int r = 0; r < w; r++) {
                    shards[r] = all.get(r).toLongVector();
                }
                checkpoints.commit(step, h, shards, net);
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException("DistributedTrainer rank " + transport.rank()
                    + ": writing checkpoint " + step + " failed", e);
        }
    }

    /**
     * Continues from the newest complete checkpoint, if any (every worker reads its own shard). Rank 0 moves newer
     * checkpoints that are not intact aside, so this run does not write over them, and logs why each was skipped and
     * which checkpoint is used instead.
     */
    private void restore() {
        try {
            CheckpointStore.Scan scan = checkpoints.scan();
            java.util.Optional<CheckpointStore.Checkpoint> found = scan.newest();
            if (found.isPresent()) {
                checkFits(found.get(), run, fingerprint, transport.worldSize(), strategy.zero());
            }
            if (transport.rank() == 0) {
                checkpoints.setAside(scan);
            }
            if (found.isEmpty()) {
                return;
            }
            CheckpointStore.Checkpoint c = found.get();
            CheckpointStore.Shard shard = checkpoints.readShard(c, transport.rank());
            CheckpointStore.Header h = shard.header();
            INDArray flat = net.params().reshape(paramCount);
            if (h.sliceTo() > h.sliceFrom()) {
                flat.get(NDArrayIndex.interval(h.sliceFrom(), h.sliceTo())).assign(shard.arrays().get(0)
                        .reshape(h.sliceTo() - h.sliceFrom()));
            }
            updater.restore(shard.arrays().subList(1, shard.arrays().size()));
            paramsWhole = false;
            makeWhole();
            net.setIteration(h.iteration());
            net.setEpoch(h.epoch());
            batchesDone = h.batchesDone();
            Nd4j.getRandom().setSeed(h.rngSeed());
            resumedAt = c.step();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException("DistributedTrainer rank " + transport.rank()
                    + ": resuming from " + checkpoints + " failed: " + e.getMessage(), e);
        }
    }

    /**
     * Checks, without a transport, that the newest complete checkpoint in {@code dir} (if any) can be resumed by
     * {@code model} as run {@code run} on {@code worldSize} workers at {@code zero}: what a launcher calls before
     * starting workers, so a mismatch is one clear error instead of one per worker. Newer checkpoints that are not
     * intact are passed over silently here: the resuming trainer's rank 0 logs them and moves them aside.
     *
     * @return the step of that checkpoint, or -1 if there is none
     * @throws IllegalArgumentException naming the checkpoint and what does not fit
     */
    public static int checkResumable(java.nio.file.Path dir, Model model, String run, int worldSize, ZeroStage zero) {
        try {
            java.util.Optional<CheckpointStore.Checkpoint> found = new CheckpointStore(dir).scan().newest();
            if (found.isEmpty()) {
                return -1;
            }
            TrainableNetwork net = TrainableNetwork.of(model);
            checkFits(found.get(), run, fingerprint(net.configurationJson(), net.params().length()), worldSize, zero);
            return found.get().step();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException("reading checkpoints in " + dir + " failed", e);
        }
    }

    private static void checkFits(CheckpointStore.Checkpoint c, String run, String fingerprint, int worldSize,
                                  ZeroStage zero) {
        String theirRun = c.json().get("run").asText();
        if (!theirRun.equals(run)) {
            throw new IllegalArgumentException("DistributedTrainer: checkpoint " + c.manifest()
                    + " belongs to run '" + theirRun + "', this is run '" + run + "'");
        }
        if (!c.json().get("fingerprint").asText().equals(fingerprint)) {
            throw new IllegalArgumentException("DistributedTrainer: checkpoint " + c.manifest() + " is of another "
                    + "model (configuration or parameter count differ from this network's)");
        }
        int theirStage = c.json().get("zeroStage").asInt();
        if (c.worldSize() != worldSize || theirStage != zero.stage()) {
            throw new IllegalArgumentException("DistributedTrainer: checkpoint " + c.manifest()
                    + " was written by " + c.worldSize() + " workers at ZeRO stage " + theirStage + "; this run "
                    + "has " + worldSize + " at stage " + zero.stage() + ". Resume with "
                    + "the same world size and stage (re-sharding a checkpoint is not supported)");
        }
    }

    /**
     * Before a step's forward pass, ZeRO stage 3: the parameters the step needs. Without listeners on the network
     * itself (DL4J calls those in the middle of the passes, where they must see every parameter), attn4j's
     * layers gather their own parameters each time they run and release them afterwards
     * ({@link #useParameters}), so only the other layers' parameters are gathered here: the layer-by-layer
     * gathering of ZeRO stage 3 for the layers that hold most of a transformer's parameters. A step that starts
     * whole (after a public {@code fit}) gathers nothing here, and each attention layer first uses its parameters
     * where they lie.
     */
    private void gatherForStep() {
        if (strategy.zero() != ZeroStage.PARAMETERS || selfGathering.isEmpty() || !net.listeners().isEmpty()) {
            makeWhole();
            return;
        }
        currentLayers.clear();
        if (paramsWhole) {
            selfGathering.forEach(r -> currentLayers.add(r[0]));
        } else {
            long at = 0;
            for (long[] r : selfGathering) {
                if (r[0] > at) {
                    shards.gather(at, r[0]);
                }
                at = r[1];
            }
            if (at < paramCount) {
                shards.gather(at, paramCount);
            }
        }
        gatherPerLayer = true;
    }

    /**
     * One use of a layer's parameters (called by the attention layers through the sequence-parallel context):
     * gathered now unless still current from the last public {@code fit}, released when the use is closed, while
     * this step gathers per layer.
     */
    SequenceParallel.ParameterUse useParameters(INDArray layerParameters) {
        if (!gatherPerLayer) {
            return () -> { };
        }
        long[] r = shards.rangeOf(layerParameters);
        if (!currentLayers.remove(r[0])) {
            shards.gather(r[0], r[1]);
        }
        return () -> {
            shards.release(r[0], r[1]);
            paramsWhole = false;
        };
    }

    /** The flat ranges of the layers (in flat order) that gather their own parameters: attn4j's layers. */
    private static List<long[]> selfGatheringRanges(List<Trainable> layers) {
        List<long[]> out = new ArrayList<>();
        long offset = 0;
        for (Trainable t : layers) {
            Object layer = t instanceof GraphVertex v && v.hasLayer() ? v.getLayer() : t;
            if (layer instanceof RowLayerImpl<?, ?> && t.numParams() > 0) {
                out.add(new long[] {offset, offset + t.numParams()});
            }
            offset += t.numParams();
        }
        return out;
    }

    /** ZeRO stage 3 between steps: only this worker's slice of the parameters stays resident. */
    private void releaseUnownedParameters() {
        shards.release(0, paramCount);
        paramsWhole = false;
    }

    private static String fingerprint(String configurationJson, long params) {
        try {
            java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
            sha.update(configurationJson.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            sha.update(Long.toString(params).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            return java.util.HexFormat.of().formatHex(sha.digest());
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * Makes the parameter vector whole on every worker if it is not; every worker calls it.
     *
     * @deprecated not needed: every public {@code fit} returns with the network whole, so this does nothing
     */
    @Deprecated
    public void gatherParameters() {
        makeWhole();
    }

    /** Every worker's parameter vector whole and current again (ZeRO stage 3); a no-op when it is. */
    private void makeWhole() {
        if (paramsWhole) {
            return;
        }
        shards.gatherAll();
        paramsWhole = true;
    }

    /**
     * Sums the gradients over all workers and updates: stage 0 all-reduces the whole vector and updates it all;
     * from stage 1 the gradient is reduce-scattered (ZeRO's partition of the sum lands in this worker's slice of
     * the gradient vector), the slice is updated with the slice's optimizer state, and (stages 1 and 2) the
     * parameter slices are all-gathered: 2 x the parameter bytes per step, the traffic of an all-reduce. From
     * stage 2 the gradient pages outside the slice are released; stage 3 gathers the parameters later instead
     * (at the end of a public {@code fit}, or before the next forward pass of an epoch).
     */
    private void step(double divisor) {
        INDArray grad = net.gradients().reshape(paramCount);
        int iteration = net.iteration();
        int epoch = net.epoch();
        INDArray params = net.params();
        if (strategy.zero() == ZeroStage.NONE) {
            INDArray sum = world.allReduce(grad);
            clip(sum, updater.trainedSquares(sum), divisor);
            updater.step(sum, params, iteration, epoch, divisor);
            sum.close();
            return;
        }
        int w = transport.worldSize();
        List<INDArray[]> blocks = new ArrayList<>(w);
        for (int r = 0; r < w; r++) {
            blocks.add(new INDArray[] {shards.slice(grad, r)});
        }
        INDArray sum = world.reduceScatter(Reduction.sum(), blocks)[0];
        INDArray mine = shards.slice(grad, transport.rank());
        mine.assign(sum.reshape(mine.shape()));
        sum.close();
        if (strategy.zero().stage() >= 2) {          // from here to the next backward pass: the slice only
            ResidentPages.release(grad, 0, sliceFrom);
            ResidentPages.release(grad, sliceTo, paramCount);
        }
        INDArray squares = Nd4j.scalar(DataType.DOUBLE, updater.trainedSquares(mine)).reshape(1);
        clip(mine, world.allReduce(squares).getDouble(0), divisor);
        updater.step(mine, params, iteration, epoch, divisor);
        if (strategy.zero() == ZeroStage.PARAMETERS) {
            paramsWhole = false;                   // the other slices are a step behind until gathered
        } else {
            shards.gatherAll();
        }
    }

    /**
     * Records the norm of the gradient the updater receives ({@code g / divisor}, its squared sum over every worker
     * {@code squares / divisor^2}) and scales {@code g} in place if it exceeds the clipping norm.
     */
    private void clip(INDArray g, double squares, double divisor) {
        lastGradientNorm = Math.sqrt(squares) / divisor;
        if (maxGradientNorm > 0 && lastGradientNorm > maxGradientNorm) {
            g.muli(maxGradientNorm / (lastGradientNorm + 1e-6));
        }
    }

    private SequenceShardContext context(int n) {
        if (context == null || context.length() != n) {
            SequenceLayout layout = strategy.effectiveLayout(causalLayout);
            int parts = layout == SequenceLayout.ZIGZAG ? 2 * sequenceMembers.length : sequenceMembers.length;
            if (n < parts || n % parts != 0) {
                throw new IllegalArgumentException("DistributedTrainer: sequence length " + n + " does not split "
                        + "into " + parts + " equal parts for the " + layout + " layout over "
                        + sequenceMembers.length + " workers");
            }
            context = new SequenceShardContext(transport, sequenceMembers, strategy, causalLayout, n,
                    this::useParameters);
        }
        return context;
    }

    /** This worker's data-parallel group's examples. */
    /** This data-parallel group's examples' documents (whole sequences: every member looks up its positions). */
    private Documents examples(Documents documents, int perGroup) {
        if (documents == null || perGroup == 0) {
            return documents;
        }
        int[][] ids = new int[perGroup][];
        for (int i = 0; i < perGroup; i++) {
            ids[i] = documents.ids(dataIndex * perGroup + i);
        }
        return Documents.of(ids);
    }

    private INDArray examples(INDArray a, int perGroup) {
        if (perGroup == 0) {
            return a;
        }
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
