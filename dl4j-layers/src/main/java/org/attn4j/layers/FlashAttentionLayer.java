package org.attn4j.layers;

import java.util.Objects;

import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.nd4j.linalg.api.buffer.DataType;

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
 * <p>With {@link Builder#rope} set, q and k are rotated ({@link RotaryEmbedding}) at their global positions before
 * attention: on one device {@code 0 .. N-1}, on a sequence-parallel worker its shard's positions, while decoding the
 * positions after the cache, and with packed documents either the packed positions or each document's own.
 *
 * <p>Serialises to JSON through DL4J's mechanism (class name as type id, bean properties).
 */
public class FlashAttentionLayer extends AttentionLayerBase {

    private static final String NAME = "FlashAttentionLayer";

    /** Sliding window width; 0 means none. */
    private int slidingWindow;
    /** Score scale; null means {@code 1 / sqrt(headSize)}. */
    private Double scale;
    /** Rotary position embedding of q and k, or null for none. */
    private RotaryEmbedding rope;
    /** With packed documents, whether RoPE's positions restart at 0 at each document (else they run on). */
    private boolean ropeRestartsPerDocument;

    /** For JSON deserialisation only; use {@link Builder}. */
    private FlashAttentionLayer() {
        super(NAME);
    }

    private FlashAttentionLayer(Builder b) {
        super(NAME, b);
        this.slidingWindow = b.slidingWindow;
        this.scale = b.scale;
        this.rope = b.rope;
        this.ropeRestartsPerDocument = b.ropeRestartsPerDocument;
        initializeConstraints(b);
        validate(false);
    }

    /**
     * Checks the settings; with {@code complete} also that nIn and nOut are known.
     *
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    @Override
    void validate(boolean complete) {
        super.validate(complete);
        String who = who();
        AttentionSettings.require(slidingWindow >= 0,
                who + ": slidingWindow must be >= 0 (0 = none), got " + slidingWindow);
        AttentionSettings.require(scale == null || (scale > 0 && Double.isFinite(scale)),
                who + ": scale must be finite and > 0, got " + scale);
        if (rope != null && (complete || getHeadSize() > 0 || getNOut() > 0)) {
            try {
                rope.rotaryDims(effectiveHeadSize());
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(who + ": " + e.getMessage(), e);
            }
        }
    }

    /** The score scale in use: {@code scale} if set, else {@code 1 / sqrt(effectiveHeadSize())}. */
    public double effectiveScale() {
        return FlashAttention.resolveScale(scale, effectiveHeadSize());
    }

    /** A {@link FlashAttentionLayerImpl}. */
    @Override
    protected Layer newImplementation(NeuralNetConfiguration conf, DataType dataType) {
        return new FlashAttentionLayerImpl(conf, dataType);
    }

    /** The {@link FlashAttentionParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return FlashAttentionParamInitializer.getInstance();
    }

    /** The projections, attention output and output per step. */
    @Override
    protected long inferenceMemory(long steps) {
        return steps * activationsPerStep();
    }

    /** Training keeps q, k, v, o, lse and the flattened input for backprop, and builds their gradients. */
    @Override
    protected long trainingMemory(long steps) {
        return 2 * steps * (activationsPerStep() + getNHeads() + nIn);
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

    /** The rotary position embedding of q and k, or null for none. */
    public RotaryEmbedding getRope() {
        return rope;
    }

    /** Sets the rotary position embedding, null for none (for JSON). */
    public void setRope(RotaryEmbedding rope) {
        this.rope = rope;
    }

    /** With packed documents: whether RoPE's positions restart at 0 at each document rather than run on. */
    public boolean isRopeRestartsPerDocument() {
        return ropeRestartsPerDocument;
    }

    /** Sets whether RoPE's positions restart at each packed document (for JSON). */
    public void setRopeRestartsPerDocument(boolean restarts) {
        this.ropeRestartsPerDocument = restarts;
    }

    /** Equal when the DL4J settings and every attention setting are equal. */
    @Override
    public boolean equals(Object o) {
        return o instanceof FlashAttentionLayer other && super.equals(o) && slidingWindow == other.slidingWindow
                && Objects.equals(scale, other.scale) && Objects.equals(rope, other.rope)
                && ropeRestartsPerDocument == other.ropeRestartsPerDocument;
    }

    /** Only a FlashAttentionLayer may equal this one. */
    @Override
    protected boolean canEqual(Object other) {
        return other instanceof FlashAttentionLayer;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), slidingWindow, scale, rope, ropeRestartsPerDocument);
    }

    /** {@code slidingWindow} and {@code scale}. */
    @Override
    protected String ownSettings() {
        return ", slidingWindow=" + slidingWindow + ", scale=" + (scale == null ? "default" : scale)
                + (rope == null ? "" : ", rope=" + rope + (ropeRestartsPerDocument ? " restarting per document" : ""));
    }

    /**
     * Builder for {@link FlashAttentionLayer}. Defaults: nKvHeads = nHeads, headSize = nOut / nHeads,
     * not causal, no window, scale {@code 1 / sqrt(headSize)}, the input type's format or NCW, identity
     * activation.
     */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends AttentionLayerBase.Builder<Builder> {
        private int slidingWindow;
        private Double scale;
        private RotaryEmbedding rope;
        private boolean ropeRestartsPerDocument;

        /** A builder with the defaults above. */
        public Builder() {
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

        /**
         * Rotary position embedding of q and k at their global positions (null, the default: none); see
         * {@link RotaryEmbedding}.
         */
        public Builder rope(RotaryEmbedding rope) {
            this.rope = rope;
            return this;
        }

        /**
         * With packed documents ({@link PackedSequences}): RoPE's positions restart at 0 at each document (as
         * Hugging Face's padding-free packing passes them) rather than run on through the packed sequence (the
         * default).
         */
        public Builder ropeRestartsPerDocument(boolean restarts) {
            this.ropeRestartsPerDocument = restarts;
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
