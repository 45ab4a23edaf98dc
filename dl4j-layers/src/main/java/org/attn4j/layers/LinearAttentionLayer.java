package org.attn4j.layers;

import java.util.Arrays;
import java.util.Collection;
import java.util.Objects;

import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.InputPreProcessor;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.FeedForwardLayer;
import org.deeplearning4j.nn.conf.layers.InputTypeUtil;
import org.deeplearning4j.nn.conf.memory.LayerMemoryReport;
import org.deeplearning4j.nn.conf.memory.MemoryReport;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Configuration of a multi-head linear attention layer with decay, the lightning attention of TransNormerLLM
 * (Qin et al., 2024) computed by the chunked {@link LinearAttention} op (LASP section 2.2, equations 4-19).
 *
 * <p>Input {@code [B, nIn, N]} (NCW, default) or {@code [B, N, nIn]} (NWC); output the same layout with
 * {@code nOut} features. Per time step s and query head h (GQA as in {@link FlashAttentionLayer}):
 * <pre>
 *   q = x Wq + bq,  k = x Wk + bk,  v = x Wv + bv                (k, v zero at padded steps)
 *   causal:      kv_s = lambda_h kv_(s-1) + k_s v_s^T,  o_s = q_s^T kv_s
 *   non-causal:  o_s = q_s^T (sum_j k_j v_j^T)                   (lambda = 1)
 *   a = g . m / sqrt(mean(m^2) + 1e-6)                           (m = heads of o concatenated, H*hs features)
 *   out = activation(a Wo + bo)                                   (identity unless set; zero at padded steps)
 * </pre>
 * The norm is TransNormerLLM's SRMSNorm (LASP equation 2's {@code Norm}) with a learned gain {@code g}
 * (starting at {@code gainInit}, 1 unless set). q and k enter as projected: no scale, no feature map.
 *
 * <p>Decay {@code lambda_h}: TransNormerLLM's fixed slopes {@link Decay#transNormerSlopes} by default, or
 * fixed values (one, or one per query head), or learned as {@code lambda = sigmoid(theta)} starting from
 * those values. Non-causal attention has no decay.
 *
 * <p>Parameters (see {@link LinearAttentionParamInitializer}): {@code Wq, bq, Wk, bk, Wv, bv, g, Wo, bo}
 * and, with a learned decay, {@code theta}.
 *
 * <p>Serialises to JSON through DL4J's mechanism (class name as type id, bean properties).
 */
public class LinearAttentionLayer extends FeedForwardLayer {

    /** The epsilon inside the RMS norm's square root. */
    public static final double NORM_EPS = 1e-6;

    private static final String NAME = "LinearAttentionLayer";

    private int nHeads;
    private int nKvHeads;
    /** Per-head size; 0 means {@code nOut / nHeads}. */
    private int headSize;
    private boolean causal;
    /** Fixed (or initial, when learned) lambda per query head or one for all; null means TransNormerLLM's. */
    private double[] decay;
    private boolean learnDecay;
    /** Positions per chunk of the op; 0 means {@link LinearAttention#DEFAULT_CHUNK}. */
    private int chunkSize;
    /** Null until set or taken from the input type; {@link #dataFormat()} reads null as NCW. */
    private RNNFormat rnnDataFormat;

    /** For JSON deserialisation only; use {@link Builder}. */
    private LinearAttentionLayer() {
    }

    private LinearAttentionLayer(Builder b) {
        super(b);
        this.nHeads = b.nHeads;
        this.nKvHeads = b.nKvHeads == 0 ? b.nHeads : b.nKvHeads;
        this.headSize = b.headSize;
        this.causal = b.causal;
        this.decay = b.decay == null ? null : b.decay.clone();
        this.learnDecay = b.learnDecay;
        this.chunkSize = b.chunkSize;
        this.rnnDataFormat = b.rnnDataFormat;
        initializeConstraints(b);
        validate(false);
    }

    /**
     * Checks the settings; with {@code complete} also that nIn and nOut are known.
     *
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    void validate(boolean complete) {
        String who = AttentionSettings.who(NAME, layerName);
        AttentionSettings.validateHeads(who, nHeads, nKvHeads, headSize, nIn, nOut, complete);
        AttentionSettings.require(chunkSize >= 0, who + ": chunkSize must be >= 1 (or 0 for the op's default "
                + LinearAttention.DEFAULT_CHUNK + "), got " + chunkSize);
        if (decay != null) {
            AttentionSettings.require(causal, who + ": decay " + Arrays.toString(decay) + " needs causal "
                    + "attention; non-causal linear attention has no decay (lambda = 1): drop decay or set causal");
            AttentionSettings.require(decay.length == 1 || decay.length == nHeads, who + ": decay must have 1 or "
                    + "nHeads (" + nHeads + ") values, got " + decay.length);
            for (int h = 0; h < decay.length; h++) {
                AttentionSettings.require(decay[h] > 0 && decay[h] <= 1, who + ": decay values must be in (0, 1], "
                        + "got " + decay[h] + " at index " + h);
                AttentionSettings.require(!learnDecay || decay[h] < 1, who + ": learnDecay starts from theta = "
                        + "logit(lambda), so decay values must be < 1, got " + decay[h] + " at index " + h);
            }
        }
        AttentionSettings.require(!learnDecay || causal, who + ": learnDecay needs causal attention; non-causal "
                + "linear attention has no decay (lambda = 1)");
    }

    /** The per-head size in use: {@code headSize} if set, else {@code nOut / nHeads}. */
    public int effectiveHeadSize() {
        return headSize > 0 ? headSize : (int) (nOut / nHeads);
    }

    /** The op's chunk size in use: {@code chunkSize} if set, else {@link LinearAttention#DEFAULT_CHUNK}. */
    public int effectiveChunkSize() {
        return chunkSize > 0 ? chunkSize : LinearAttention.DEFAULT_CHUNK;
    }

    /**
     * The decay in use when fixed, its starting value when learned: none when not causal, else the configured
     * values, else TransNormerLLM's slopes for {@code nHeads} heads.
     */
    public Decay configuredDecay() {
        if (!causal) {
            return Decay.none();
        }
        return decay == null ? Decay.transNormerSlopes(nHeads) : Decay.perHead(decay);
    }

    /** The layout in use: the configured or input type's format, NCW if neither gave one. */
    public RNNFormat dataFormat() {
        return rnnDataFormat == null ? RNNFormat.NCW : rnnDataFormat;
    }

    /**
     * Creates the layer implementation over the given parameter view.
     *
     * @throws IllegalArgumentException if the configuration is incomplete or inconsistent
     */
    @Override
    public Layer instantiate(NeuralNetConfiguration conf, Collection<TrainingListener> trainingListeners,
                             int layerIndex, INDArray layerParamsView, boolean initializeParams,
                             DataType networkDataType) {
        validate(true);
        return AttentionSettings.wire(new LinearAttentionLayerImpl(conf, networkDataType), conf, initializer(),
                trainingListeners, layerIndex, layerParamsView, initializeParams);
    }

    /** The {@link LinearAttentionParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return LinearAttentionParamInitializer.getInstance();
    }

    /**
     * {@code recurrent(nOut, timeSeriesLength, rnnDataFormat)}.
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public InputType getOutputType(int layerIndex, InputType inputType) {
        InputType.InputTypeRecurrent r = AttentionSettings.requireRecurrent(AttentionSettings.who(NAME, layerName),
                inputType);
        return InputType.recurrent(nOut, r.getTimeSeriesLength(), dataFormat());
    }

    /**
     * Takes nIn and the data format from a recurrent input type where they are unset or {@code override} is
     * true, as DL4J's recurrent layers do.
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public void setNIn(InputType inputType, boolean override) {
        InputType.InputTypeRecurrent r = AttentionSettings.requireRecurrent(AttentionSettings.who(NAME, layerName),
                inputType);
        if (nIn <= 0 || override) {
            this.nIn = r.getSize();
        }
        if (rnnDataFormat == null || override) {
            this.rnnDataFormat = r.getFormat();
        }
    }

    /** The preprocessor DL4J's recurrent layers use for this input type (none for recurrent input). */
    @Override
    public InputPreProcessor getPreProcessorForInputType(InputType inputType) {
        return InputTypeUtil.getPreprocessorForInputTypeRnnLayers(inputType, dataFormat(), getLayerName());
    }

    /** Approximate: parameters, plus per example the projections, norm, output and the per-chunk states. */
    @Override
    public LayerMemoryReport getMemoryReport(InputType inputType) {
        InputType outputType = getOutputType(-1, inputType);
        long params = initializer().numParams(this);
        long updaterState = getIUpdater() == null ? 0 : getIUpdater().stateSize(params);
        long steps = Math.max(((InputType.InputTypeRecurrent) inputType).getTimeSeriesLength(), 1);
        long hs = effectiveHeadSize();
        long perStep = (2L * nHeads + 2L * nKvHeads) * hs + nOut;
        long chunks = (steps + effectiveChunkSize() - 1) / effectiveChunkSize();
        long states = chunks * nHeads * hs * hs;
        long inference = steps * perStep + states;
        // training keeps q, k, v, o, the norm's input and output and the input for backprop, and the cached
        // states entering each chunk (LASP section 2.3), and builds their gradients
        long training = 2 * (steps * (perStep + 2L * nHeads * hs + nIn) + states);
        return new LayerMemoryReport.Builder(layerName, LinearAttentionLayer.class, inputType, outputType)
                .standardMemory(params, updaterState)
                .workingMemory(0, inference, 0, training)
                .cacheMemory(MemoryReport.CACHE_MODE_ALL_ZEROS, MemoryReport.CACHE_MODE_ALL_ZEROS)
                .build();
    }

    /** Number of query heads. */
    public int getNHeads() {
        return nHeads;
    }

    /** Sets the number of query heads (for JSON). */
    public void setNHeads(int nHeads) {
        this.nHeads = nHeads;
    }

    /** Number of key/value heads; divides {@link #getNHeads()}. */
    public int getNKvHeads() {
        return nKvHeads;
    }

    /** Sets the number of key/value heads (for JSON). */
    public void setNKvHeads(int nKvHeads) {
        this.nKvHeads = nKvHeads;
    }

    /** Configured per-head size, 0 for {@code nOut / nHeads}; see {@link #effectiveHeadSize()}. */
    public int getHeadSize() {
        return headSize;
    }

    /** Sets the per-head size, 0 for {@code nOut / nHeads} (for JSON). */
    public void setHeadSize(int headSize) {
        this.headSize = headSize;
    }

    /** Whether a step sees only itself and earlier steps (the decayed recurrence) rather than all steps. */
    public boolean isCausal() {
        return causal;
    }

    /** Sets causal attention (for JSON). */
    public void setCausal(boolean causal) {
        this.causal = causal;
    }

    /** A copy of the configured lambdas (one, or one per query head), null for TransNormerLLM's slopes. */
    public double[] getDecay() {
        return decay == null ? null : decay.clone();
    }

    /** Sets the lambdas, null for TransNormerLLM's slopes (for JSON). */
    public void setDecay(double[] decay) {
        this.decay = decay == null ? null : decay.clone();
    }

    /** Whether lambda per head is a parameter, {@code sigmoid(theta)}. */
    public boolean isLearnDecay() {
        return learnDecay;
    }

    /** Sets whether the decay is learned (for JSON). */
    public void setLearnDecay(boolean learnDecay) {
        this.learnDecay = learnDecay;
    }

    /** Configured chunk size, 0 for the op's default; see {@link #effectiveChunkSize()}. */
    public int getChunkSize() {
        return chunkSize;
    }

    /** Sets the chunk size, 0 for the op's default (for JSON). */
    public void setChunkSize(int chunkSize) {
        this.chunkSize = chunkSize;
    }

    /** Configured layout, NCW {@code [B, features, N]} or NWC {@code [B, N, features]}; null if unset. */
    public RNNFormat getRnnDataFormat() {
        return rnnDataFormat;
    }

    /** Sets the layout of input and output, null for NCW unless the input type says otherwise. */
    public void setRnnDataFormat(RNNFormat rnnDataFormat) {
        this.rnnDataFormat = rnnDataFormat;
    }

    /** Equal when the DL4J settings and every attention setting are equal. */
    @Override
    public boolean equals(Object o) {
        if (o == this) {
            return true;
        }
        if (!(o instanceof LinearAttentionLayer)) {
            return false;
        }
        LinearAttentionLayer other = (LinearAttentionLayer) o;
        return other.canEqual(this) && super.equals(o) && nHeads == other.nHeads && nKvHeads == other.nKvHeads
                && headSize == other.headSize && causal == other.causal && Arrays.equals(decay, other.decay)
                && learnDecay == other.learnDecay && chunkSize == other.chunkSize
                && rnnDataFormat == other.rnnDataFormat;
    }

    @Override
    protected boolean canEqual(Object other) {
        return other instanceof LinearAttentionLayer;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), nHeads, nKvHeads, headSize, causal, Arrays.hashCode(decay),
                learnDecay, chunkSize, rnnDataFormat);
    }

    /** The attention settings, for logs and messages. */
    @Override
    public String toString() {
        return NAME + "(name=" + layerName + ", nIn=" + nIn + ", nOut=" + nOut + ", nHeads=" + nHeads
                + ", nKvHeads=" + nKvHeads + ", headSize=" + effectiveHeadSize() + ", causal=" + causal
                + ", decay=" + (decay == null ? "TransNormerLLM slopes" : Arrays.toString(decay))
                + ", learnDecay=" + learnDecay + ", chunkSize=" + effectiveChunkSize()
                + ", rnnDataFormat=" + rnnDataFormat + ")";
    }

    /**
     * Builder for {@link LinearAttentionLayer}. Defaults: nKvHeads = nHeads, headSize = nOut / nHeads, causal,
     * TransNormerLLM's fixed slopes, the op's chunk size, the input type's format or NCW, identity activation,
     * norm gain starting at {@code gainInit} (1).
     */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends FeedForwardLayer.Builder<Builder> {
        private int nHeads = 1;
        private int nKvHeads;
        private int headSize;
        private boolean causal = true;
        private double[] decay;
        private boolean learnDecay;
        private int chunkSize;
        private RNNFormat rnnDataFormat;

        /** A builder with the defaults above. */
        public Builder() {
            // the layer's output is linear; DL4J's global default activation (sigmoid) would otherwise apply
            this.activationFn = new ActivationIdentity();
        }

        /** Number of query heads ({@code > 0}). */
        public Builder nHeads(int nHeads) {
            this.nHeads = nHeads;
            return this;
        }

        /** Number of key/value heads; must divide nHeads (1 = multi-query attention). */
        public Builder nKvHeads(int nKvHeads) {
            this.nKvHeads = nKvHeads;
            return this;
        }

        /** Per-head size ({@code > 0}); default {@code nOut / nHeads}. */
        public Builder headSize(int headSize) {
            this.headSize = headSize;
            return this;
        }

        /** Causal (default): the decayed recurrence over earlier steps; else every step sees all steps. */
        public Builder causal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /**
         * Fixed lambdas in {@code (0, 1]}, one for all heads or one per query head (the starting values when
         * learned); causal only. Default TransNormerLLM's slopes.
         */
        public Builder decay(double... lambdas) {
            this.decay = lambdas == null ? null : lambdas.clone();
            return this;
        }

        /** Learn lambda per query head as {@code sigmoid(theta)}, from the configured lambdas; causal only. */
        public Builder learnDecay(boolean learnDecay) {
            this.learnDecay = learnDecay;
            return this;
        }

        /** Positions per chunk of the op ({@code >= 1}); default {@link LinearAttention#DEFAULT_CHUNK}. */
        public Builder chunkSize(int chunkSize) {
            this.chunkSize = chunkSize;
            return this;
        }

        /** Input and output layout, NCW or NWC; default the input type's format, else NCW. */
        public Builder dataFormat(RNNFormat format) {
            this.rnnDataFormat = format;
            return this;
        }

        /**
         * The validated configuration.
         *
         * @throws IllegalArgumentException naming the offending setting, expected and actual value
         */
        @Override
        public LinearAttentionLayer build() {
            return new LinearAttentionLayer(this);
        }
    }
}
