package org.attn4j.models.hf;

import java.nio.file.Path;

import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.Packing;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.WarmupCosineSchedule;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.Documents;
import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.conf.layers.BaseLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.learning.config.Sgd;

/**
 * Fine-tunes every weight of a Hugging Face decoder ({@link HfDecoder}) as transformers' {@code Trainer} does by
 * default: the mean cross-entropy per predicted token, Adam (betas 0.9 and 0.999, epsilon 1e-8, no weight decay)
 * with a linear warm-up and a cosine decay of the learning rate ({@link WarmupCosineSchedule}), and the gradient
 * clipped by its global norm. On one process or sequence- and data-parallel over many, with ZeRO, through
 * {@link DistributedTrainer}: every worker builds the same tuner over its transport and passes the same batches.
 * <pre>
 *   HfDecoder model = HfDecoder.load(dir, DataType.FLOAT);
 *   HfFineTuner tuner = HfFineTuner.builder(model, transport).learningRate(2e-5).warmupSteps(10).steps(200)
 *           .strategy(ParallelStrategy.sequence("ring", 4).withZero(ZeroStage.GRADIENTS)).build();
 *   for (...) {
 *       double loss = tuner.step(HfFineTuner.batch(sequences, DataType.FLOAT));   // [B][N] token ids
 *   }
 *   model.save(out, "BF16", 2L << 30);                                            // rank 0
 * </pre>
 * A batch of B sequences of N tokens predicts, at each position but the last, the token after it, as transformers'
 * shifted labels do. The labels are token ids ({@code [B, 1, N]}, DL4J's sparse cross-entropy), so no
 * vocabulary-sized label array is made for the batch. The loss and its gradient are means over the predicted tokens
 * ({@link DistributedTrainer.Builder#perTokenLoss}), so the norm clipping sees what PyTorch's would.
 */
public final class HfFineTuner {

    /** The output layer's name in {@link HfDecoder}'s graph. */
    private static final String HEAD = "head";

    private final HfDecoder model;
    private final DistributedTrainer trainer;
    private final WarmupCosineSchedule schedule;

    private HfFineTuner(Builder b) {
        this.model = b.model;
        this.schedule = new WarmupCosineSchedule(b.learningRate, b.minLearningRate, b.warmupSteps, b.steps);
        ComputationGraph graph = model.graph();
        for (Layer layer : graph.getLayers()) {
            if (layer.conf().getLayer() instanceof BaseLayer conf) {
                conf.setIUpdater(new Adam(schedule));
                // the head's bias exists only because DL4J's output layer needs one: frozen at zero (SGD at a rate
                // of 0, which the trainer's norm leaves out), as lm_head has none
                conf.setBiasUpdater(HEAD.equals(layer.conf().getLayer().getLayerName()) ? new Sgd(0.0) : null);
            }
        }
        DistributedTrainer.Builder t = DistributedTrainer.builder(graph, b.transport)
                .clipGradientNorm(b.maxGradientNorm).perTokenLoss(true).logEvery(0);
        if (b.strategy != null) {
            t.strategy(b.strategy);
        }
        if (b.checkpointDir != null) {
            t.checkpoints(b.checkpointDir, b.checkpointEvery).run(b.run).resume(b.resume);
        }
        this.trainer = t.build();
    }

    /**
     * A tuner of {@code model}'s weights over {@code transport} (one rank of a job, or
     * {@code InJvmTransport.group(1, timeout).get(0)} for one process).
     */
    public static Builder builder(HfDecoder model, Transport transport) {
        return new Builder(model, transport);
    }

    /**
     * One optimisation step on a batch of {@link #batch}; every worker passes the whole batch.
     *
     * @return the batch's mean cross-entropy per predicted token, before the update
     */
    public double step(DataSet batch) {
        return trainer.fit(batch);
    }

    /** The learning rate of step {@code step} (0-based). */
    public double learningRate(int step) {
        return schedule.valueAt(step, 0);
    }

    /** The global norm of the last step's gradient (of the mean loss per token), before clipping. */
    public double gradientNorm() {
        return trainer.gradientNorm();
    }

    /** The step a resumed run continues from (the steps its checkpoint holds), or 0. */
    public int resumedFromStep() {
        return Math.max(0, trainer.resumedFromStep());
    }

    /** The trainer underneath (its strategy, ZeRO's byte counts). */
    public DistributedTrainer trainer() {
        return trainer;
    }

    /** The model being tuned; whole and current after every step. */
    public HfDecoder model() {
        return model;
    }

    /**
     * A batch of causal language modelling: {@code tokens[b]} is one sequence of N ids; features are the ids
     * {@code [B, 1, N]}, labels the next ids {@code [B, 1, N]} (the last position's is 0 and unscored), the label
     * mask {@code [B, N]} 1 at every predicted position.
     *
     * @throws IllegalArgumentException for no sequences, sequences of unequal length or shorter than 2
     */
    public static DataSet batch(long[][] tokens, DataType type) {
        return batch(tokens, null, type);
    }

    /**
     * A packed batch: {@code documents[i][t]} is the document of token t of sequence i (ids in order within a
     * sequence; negative for padding), carried with the batch ({@link Packing}) so that attention stays inside each
     * document on one process and on every worker. A position predicts the next token only within its document: the
     * last token of a document, padding and the last position are not scored. Null documents give
     * {@link #batch(long[][], DataType)}.
     *
     * @throws IllegalArgumentException one line if the documents do not match the tokens' shape
     */
    public static DataSet batch(long[][] tokens, int[][] documents, DataType type) {
        int b = tokens.length;
        if (b == 0) {
            throw new IllegalArgumentException("HfFineTuner.batch: no sequences");
        }
        int n = tokens[0].length;
        if (n < 2) {
            throw new IllegalArgumentException("HfFineTuner.batch: a sequence needs at least 2 tokens, got " + n);
        }
        if (documents != null && documents.length != b) {
            throw new IllegalArgumentException("HfFineTuner.batch: " + b + " sequences and documents for "
                    + documents.length);
        }
        double[] in = new double[b * n];
        double[] next = new double[b * n];
        double[] mask = new double[b * n];
        for (int i = 0; i < b; i++) {
            if (tokens[i].length != n) {
                throw new IllegalArgumentException("HfFineTuner.batch: sequences of " + n + " and "
                        + tokens[i].length + " tokens; every sequence of a batch has the same length");
            }
            if (documents != null && documents[i].length != n) {
                throw new IllegalArgumentException("HfFineTuner.batch: sequence " + i + " has " + n + " tokens and "
                        + documents[i].length + " document ids");
            }
            for (int t = 0; t < n; t++) {
                in[i * n + t] = tokens[i][t];
                if (t + 1 < n) {
                    next[i * n + t] = tokens[i][t + 1];
                    boolean sameDocument = documents == null
                            || documents[i][t] >= 0 && documents[i][t] == documents[i][t + 1];
                    mask[i * n + t] = sameDocument ? 1 : 0;
                }
            }
        }
        INDArray features = Nd4j.createFromArray(in).castTo(type).reshape('c', b, 1, n);
        INDArray labels = Nd4j.createFromArray(next).castTo(type).reshape('c', b, 1, n);
        INDArray labelMask = Nd4j.createFromArray(mask).castTo(type).reshape('c', b, n);
        DataSet d = new DataSet(features, labels, null, labelMask);
        return documents == null ? d : (DataSet) Packing.attach(d, Documents.of(documents));
    }

    /** Builds an {@link HfFineTuner}. */
    public static final class Builder {
        private final HfDecoder model;
        private final Transport transport;
        private ParallelStrategy strategy;
        private double learningRate = 2e-5;
        private double minLearningRate;
        private int warmupSteps;
        private int steps = 1000;
        private double maxGradientNorm = 1.0;
        private Path checkpointDir;
        private int checkpointEvery;
        private String run = "attn4j-hf-finetune";
        private boolean resume;

        private Builder(HfDecoder model, Transport transport) {
            this.model = model;
            this.transport = transport;
        }

        /** How the work is split over the transport's workers; default: ring attention over all of them. */
        public Builder strategy(ParallelStrategy s) {
            this.strategy = s;
            return this;
        }

        /** The peak learning rate (default 2e-5). */
        public Builder learningRate(double rate) {
            this.learningRate = rate;
            return this;
        }

        /** The learning rate the cosine ends at (default 0, as transformers' cosine schedule). */
        public Builder minLearningRate(double rate) {
            this.minLearningRate = rate;
            return this;
        }

        /** Steps of linear warm-up (default 0). */
        public Builder warmupSteps(int n) {
            this.warmupSteps = n;
            return this;
        }

        /** The run's length: the step the cosine reaches the minimum (default 1000). */
        public Builder steps(int n) {
            this.steps = n;
            return this;
        }

        /** The global gradient norm to clip at (default 1.0, transformers' {@code max_grad_norm}); 0 does not clip. */
        public Builder clipGradientNorm(double norm) {
            this.maxGradientNorm = norm;
            return this;
        }

        /**
         * Sharded checkpoints of parameters and Adam's state into {@code dir} every {@code every} steps, and whether
         * to resume from the newest complete one ({@link DistributedTrainer.Builder#checkpoints}).
         */
        public Builder checkpoints(Path dir, int every, boolean resume) {
            this.checkpointDir = dir;
            this.checkpointEvery = every;
            this.resume = resume;
            return this;
        }

        /** The run's name in its checkpoints (default "attn4j-hf-finetune"). */
        public Builder run(String name) {
            this.run = name;
            return this;
        }

        /**
         * The tuner; sets every layer's updater to Adam on the schedule.
         *
         * @throws IllegalArgumentException naming a setting out of range, or what the trainer refuses
         */
        public HfFineTuner build() {
            if (transport == null) {
                throw new IllegalArgumentException("HfFineTuner: no transport");
            }
            if (steps < 1) {
                throw new IllegalArgumentException("HfFineTuner: steps must be >= 1, got " + steps);
            }
            if (warmupSteps >= steps && warmupSteps > 0) {
                throw new IllegalArgumentException("HfFineTuner: warm-up steps must be fewer than the steps, got "
                        + warmupSteps + " of " + steps);
            }
            return new HfFineTuner(this);
        }
    }
}
