package org.attn4j.layers;

import java.util.Collection;
import java.util.Objects;

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
 * Configuration of a multi-head self-attention layer computed by the exact, memory-efficient
 * {@link org.attn4j.ops.flash.FlashAttention} op (no {@code N x N} matrix is held).
 *
 * <p>Input {@code [B, nIn, N]} (NCW, default) or {@code [B, N, nIn]} (NWC); output the same layout
 * with {@code nOut} features. Per time step:
 * {@code q = x Wq + bq, k = x Wk + bk, v = x Wv + bv}, attention per head (GQA when
 * {@code nKvHeads < nHeads}: query head {@code h} reads kv head {@code h / (nHeads / nKvHeads)}),
 * heads concatenated, {@code out = activation(a Wo + bo)} (identity unless set). A DL4J feature mask
 * {@code [B, N]} hides padded keys and zeroes the output at padded steps.
 *
 * <p>Parameters (see {@link FlashAttentionParamInitializer}): {@code Wq [nIn, H*hs]}, {@code bq},
 * {@code Wk [nIn, Hkv*hs]}, {@code bk}, {@code Wv [nIn, Hkv*hs]}, {@code bv}, {@code Wo [H*hs, nOut]},
 * {@code bo}.
 *
 * <p>Serialises to JSON through DL4J's mechanism (class name as type id, bean properties).
 */
public class FlashAttentionLayer extends FeedForwardLayer {

    private static final String NAME = "FlashAttentionLayer";

    private int nHeads;
    private int nKvHeads;
    /** Per-head size; 0 means {@code nOut / nHeads}. */
    private int headSize;
    private boolean causal;
    /** Sliding window width; 0 means none. */
    private int slidingWindow;
    /** Score scale; null means {@code 1 / sqrt(headSize)}. */
    private Double scale;
    /** Null until set or taken from the input type; {@link #dataFormat()} reads null as NCW. */
    private RNNFormat rnnDataFormat;

    /** For JSON deserialisation only; use {@link Builder}. */
    private FlashAttentionLayer() {
    }

    private FlashAttentionLayer(Builder b) {
        super(b);
        this.nHeads = b.nHeads;
        this.nKvHeads = b.nKvHeads == 0 ? b.nHeads : b.nKvHeads;
        this.headSize = b.headSize;
        this.causal = b.causal;
        this.slidingWindow = b.slidingWindow;
        this.scale = b.scale;
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
        String who = who();
        AttentionSettings.validateHeads(who, nHeads, nKvHeads, headSize, nIn, nOut, complete);
        AttentionSettings.require(slidingWindow >= 0,
                who + ": slidingWindow must be >= 0 (0 = none), got " + slidingWindow);
        AttentionSettings.require(scale == null || (scale > 0 && Double.isFinite(scale)),
                who + ": scale must be finite and > 0, got " + scale);
    }

    private String who() {
        return AttentionSettings.who(NAME, layerName);
    }

    /** The per-head size in use: {@code headSize} if set, else {@code nOut / nHeads}. */
    public int effectiveHeadSize() {
        return headSize > 0 ? headSize : (int) (nOut / nHeads);
    }

    /** The score scale in use: {@code scale} if set, else {@code 1 / sqrt(effectiveHeadSize())}. */
    public double effectiveScale() {
        return scale != null ? scale : 1.0 / Math.sqrt(effectiveHeadSize());
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
        return AttentionSettings.wire(new FlashAttentionLayerImpl(conf, networkDataType), conf, initializer(),
                trainingListeners, layerIndex, layerParamsView, initializeParams);
    }

    /** The {@link FlashAttentionParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return FlashAttentionParamInitializer.getInstance();
    }

    /**
     * {@code recurrent(nOut, timeSeriesLength, rnnDataFormat)}.
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public InputType getOutputType(int layerIndex, InputType inputType) {
        InputType.InputTypeRecurrent r = requireRecurrent(inputType);
        return InputType.recurrent(nOut, r.getTimeSeriesLength(), dataFormat());
    }

    /**
     * Takes nIn and the data format from a recurrent input type where they are unset or {@code override}
     * is true, as DL4J's recurrent layers do.
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public void setNIn(InputType inputType, boolean override) {
        InputType.InputTypeRecurrent r = requireRecurrent(inputType);
        if (nIn <= 0 || override) {
            this.nIn = r.getSize();
        }
        if (rnnDataFormat == null || override) {
            this.rnnDataFormat = r.getFormat();
        }
    }

    private InputType.InputTypeRecurrent requireRecurrent(InputType inputType) {
        return AttentionSettings.requireRecurrent(who(), inputType);
    }

    /** The preprocessor DL4J's recurrent layers use for this input type (none for recurrent input). */
    @Override
    public InputPreProcessor getPreProcessorForInputType(InputType inputType) {
        return InputTypeUtil.getPreprocessorForInputTypeRnnLayers(inputType, dataFormat(), getLayerName());
    }

    /** Approximate: parameters, plus per example the projections, attention output and output. */
    @Override
    public LayerMemoryReport getMemoryReport(InputType inputType) {
        InputType outputType = getOutputType(-1, inputType);
        long params = initializer().numParams(this);
        long updaterState = getIUpdater() == null ? 0 : getIUpdater().stateSize(params);
        long n = ((InputType.InputTypeRecurrent) inputType).getTimeSeriesLength();
        long steps = Math.max(n, 1);
        long hs = effectiveHeadSize();
        long perStep = (2L * nHeads + 2L * nKvHeads) * hs + nOut;
        long inference = steps * perStep;
        // training keeps q, k, v, o, lse and the flattened input for backprop, and builds their gradients
        long training = 2 * steps * (perStep + nHeads + nIn);
        return new LayerMemoryReport.Builder(layerName, FlashAttentionLayer.class, inputType, outputType)
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

    /** Whether a step attends only to itself and earlier steps. */
    public boolean isCausal() {
        return causal;
    }

    /** Sets causal masking (for JSON). */
    public void setCausal(boolean causal) {
        this.causal = causal;
    }

    /** Sliding-window width in steps, 0 for none. */
    public int getSlidingWindow() {
        return slidingWindow;
    }

    /** Sets the sliding-window width, 0 for none (for JSON). */
    public void setSlidingWindow(int slidingWindow) {
        this.slidingWindow = slidingWindow;
    }

    /** Configured score scale, null for the default; see {@link #effectiveScale()}. */
    public Double getScale() {
        return scale;
    }

    /** Sets the score scale, null for the default (for JSON). */
    public void setScale(Double scale) {
        this.scale = scale;
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
        if (!(o instanceof FlashAttentionLayer)) {
            return false;
        }
        FlashAttentionLayer other = (FlashAttentionLayer) o;
        return other.canEqual(this) && super.equals(o) && nHeads == other.nHeads && nKvHeads == other.nKvHeads
                && headSize == other.headSize && causal == other.causal && slidingWindow == other.slidingWindow
                && Objects.equals(scale, other.scale) && rnnDataFormat == other.rnnDataFormat;
    }

    @Override
    protected boolean canEqual(Object other) {
        return other instanceof FlashAttentionLayer;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), nHeads, nKvHeads, headSize, causal, slidingWindow, scale,
                rnnDataFormat);
    }

    /** The attention settings, for logs and messages. */
    @Override
    public String toString() {
        return NAME + "(name=" + layerName + ", nIn=" + nIn + ", nOut=" + nOut + ", nHeads=" + nHeads
                + ", nKvHeads=" + nKvHeads + ", headSize=" + effectiveHeadSize() + ", causal=" + causal
                + ", slidingWindow=" + slidingWindow + ", scale=" + (scale == null ? "default" : scale)
                + ", rnnDataFormat=" + rnnDataFormat + ")";
    }

    /**
     * Builder for {@link FlashAttentionLayer}. Defaults: nKvHeads = nHeads, headSize = nOut / nHeads,
     * not causal, no window, scale {@code 1 / sqrt(headSize)}, the input type's format or NCW, identity
     * activation.
     */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends FeedForwardLayer.Builder<Builder> {
        private int nHeads = 1;
        private int nKvHeads;
        private int headSize;
        private boolean causal;
        private int slidingWindow;
        private Double scale;
        private RNNFormat rnnDataFormat;

        /** A builder with the defaults above. */
        public Builder() {
            // attention output is linear; DL4J's global default activation (sigmoid) would otherwise apply
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

        /** Causal masking: step {@code i} attends to steps {@code j <= i}. */
        public Builder causal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /** Sliding window width {@code W >= 0} (0 = none): causal {@code i - j < W}, else {@code |i - j| < W}. */
        public Builder slidingWindow(int slidingWindow) {
            this.slidingWindow = slidingWindow;
            return this;
        }

        /** Score scale ({@code > 0}); default {@code 1 / sqrt(headSize)}. */
        public Builder scale(double scale) {
            this.scale = scale;
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
        public FlashAttentionLayer build() {
            return new FlashAttentionLayer(this);
        }
    }
}
