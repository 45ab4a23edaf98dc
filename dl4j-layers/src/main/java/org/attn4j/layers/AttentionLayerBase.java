package org.attn4j.layers;

import java.util.Objects;

/**
 * What the multi-head attention layer configurations share: query and key/value head counts (GQA when
 * {@code nKvHeads < nHeads}: query head {@code h} reads kv head {@code h / (nHeads / nKvHeads)}), the per-head
 * size, causality and the recurrent layout {@code [B, F, N]} (NCW) or {@code [B, N, F]} (NWC), with the checks,
 * input and output types and wiring that follow from them.
 *
 * <p>Its settings are bean properties of the concrete class, so DL4J's JSON (class name as type id, bean
 * properties) is the same as if each concrete class declared them: {@code nheads}, {@code nkvHeads},
 * {@code headSize}, {@code causal}, {@code rnnDataFormat}.
 */
public abstract class AttentionLayerBase extends RecurrentFeedForwardLayer {

    /** The concrete layer's name in messages, e.g. {@code FlashAttentionLayer}; not a bean property. */
    private final String type;
    private int nHeads;
    private int nKvHeads;
    /** Per-head size; 0 means {@code nOut / nHeads}. */
    private int headSize;
    private boolean causal;
    /** Whether the q, k and v projections add a bias (true unless set; older JSON has none and means true). */
    private boolean qkvBias = true;
    /** Whether the output projection adds a bias (true unless set). */
    private boolean outputBias = true;

    /**
     * For JSON deserialisation of the concrete class only.
     *
     * @param type the concrete layer's name in messages
     */
    protected AttentionLayerBase(String type) {
        this.type = type;
    }

    /**
     * Takes the shared settings from the builder, nKvHeads defaulting to nHeads. The concrete constructor sets
     * its own, then calls {@code initializeConstraints(b)} and {@code validate(false)}.
     *
     * @param type the concrete layer's name in messages
     * @param b    the builder
     */
    protected AttentionLayerBase(String type, Builder<?> b) {
        super(b);
        this.type = type;
        this.nHeads = b.nHeads;
        this.nKvHeads = b.nKvHeads == 0 ? b.nHeads : b.nKvHeads;
        this.headSize = b.headSize;
        this.causal = b.causal;
        this.qkvBias = b.qkvBias;
        this.outputBias = b.outputBias;
    }

    /**
     * Checks the head settings; with {@code complete} also that nIn and nOut are known. A concrete class checks
     * its own settings after these.
     *
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    @Override
    void validate(boolean complete) {
        AttentionSettings.validateHeads(who(), nHeads, nKvHeads, headSize, nIn, nOut, complete);
    }

    /** The concrete layer's name for messages about the layer as a kind, e.g. {@code FlashAttentionLayer}. */
    @Override
    String layerType() {
        return type;
    }

    /** The per-head size in use: {@code headSize} if set, else {@code nOut / nHeads}. */
    public int effectiveHeadSize() {
        return headSize > 0 ? headSize : (int) (nOut / nHeads);
    }

    /** Elements per time step of q, k, v, the attention output and the layer output. */
    protected long activationsPerStep() {
        return (2L * nHeads + 2L * nKvHeads) * effectiveHeadSize() + nOut;
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

    /** Whether a step sees only itself and earlier steps rather than all steps. */
    public boolean isCausal() {
        return causal;
    }

    /** Sets causal attention (for JSON). */
    public void setCausal(boolean causal) {
        this.causal = causal;
    }

    /** Whether the q, k and v projections add a bias ({@code bq, bk, bv}). */
    public boolean isQkvBias() {
        return qkvBias;
    }

    /** Sets whether the q, k and v projections add a bias (for JSON). */
    public void setQkvBias(boolean qkvBias) {
        this.qkvBias = qkvBias;
    }

    /** Whether the output projection adds a bias ({@code bo}). */
    public boolean isOutputBias() {
        return outputBias;
    }

    /** Sets whether the output projection adds a bias (for JSON). */
    public void setOutputBias(boolean outputBias) {
        this.outputBias = outputBias;
    }

    /**
     * Equal when the DL4J settings and the shared attention settings are equal and each side's
     * {@link #canEqual} accepts the other; a concrete class adds its own settings.
     */
    @Override
    public boolean equals(Object o) {
        if (o == this) {
            return true;
        }
        if (!(o instanceof AttentionLayerBase other)) {
            return false;
        }
        return other.canEqual(this) && super.equals(o) && nHeads == other.nHeads && nKvHeads == other.nKvHeads
                && headSize == other.headSize && causal == other.causal && qkvBias == other.qkvBias
                && outputBias == other.outputBias;
    }

    /** Whether {@code other} may equal this; a concrete class narrows it to its own type. */
    @Override
    protected boolean canEqual(Object other) {
        return other instanceof AttentionLayerBase;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), nHeads, nKvHeads, headSize, causal, qkvBias, outputBias);
    }

    /** The attention settings, for logs and messages. */
    @Override
    public String toString() {
        return type + "(name=" + layerName + ", nIn=" + nIn + ", nOut=" + nOut + ", nHeads=" + nHeads
                + ", nKvHeads=" + nKvHeads + ", headSize=" + effectiveHeadSize() + ", causal=" + causal
                + (qkvBias ? "" : ", qkvBias=false") + (outputBias ? "" : ", outputBias=false") + ownSettings() + ", rnnDataFormat=" + getRnnDataFormat() + ")";
    }

    /** The concrete class's settings for {@link #toString()}, each as {@code ", name=value"}. */
    protected abstract String ownSettings();

    /**
     * The setters the attention layer builders share. Defaults: nHeads 1, nKvHeads = nHeads, headSize =
     * nOut / nHeads, not causal, biases on every projection, the input type's format or NCW, identity activation;
     * a concrete builder may
     * change them in its constructor.
     *
     * @param <T> the concrete builder, returned by every setter
     */
    public abstract static class Builder<T extends Builder<T>> extends RecurrentFeedForwardLayer.Builder<T> {
        /** Number of query heads. */
        protected int nHeads = 1;
        /** Number of key/value heads, 0 for nHeads. */
        protected int nKvHeads;
        /** Per-head size, 0 for {@code nOut / nHeads}. */
        protected int headSize;
        /** Causal attention. */
        protected boolean causal;
        /** Biases on the q, k and v projections. */
        protected boolean qkvBias = true;
        /** Bias on the output projection. */
        protected boolean outputBias = true;

        /** Number of query heads ({@code > 0}). */
        public T nHeads(int nHeads) {
            this.nHeads = nHeads;
            return self();
        }

        /** Number of key/value heads; must divide nHeads (1 = multi-query attention). */
        public T nKvHeads(int nKvHeads) {
            this.nKvHeads = nKvHeads;
            return self();
        }

        /** Per-head size ({@code > 0}); default {@code nOut / nHeads}. */
        public T headSize(int headSize) {
            this.headSize = headSize;
            return self();
        }

        /**
         * Whether the q, k and v projections add a bias (default true; Llama and Mistral have none, Qwen2 has
         * them).
         */
        public T qkvBias(boolean qkvBias) {
            this.qkvBias = qkvBias;
            return self();
        }

        /** Whether the output projection adds a bias (default true; Llama, Mistral and Qwen2 have none). */
        public T outputBias(boolean outputBias) {
            this.outputBias = outputBias;
            return self();
        }

        /** Causal: step {@code i} sees steps {@code j <= i} only; what that means is the concrete layer's. */
        public T causal(boolean causal) {
            this.causal = causal;
            return self();
        }
    }
}
