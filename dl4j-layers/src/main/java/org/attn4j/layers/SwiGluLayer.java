package org.attn4j.layers;

import java.util.Objects;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.nd4j.linalg.activations.IActivation;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * The gated feed-forward block of Llama-family models (SwiGLU; Shazeer, "GLU Variants Improve Transformer", 2020),
 * applied at every time step of a sequence:
 * <pre>
 *   out = down( silu(gate x) * up x )        silu(a) = a sigmoid(a), * element-wise
 * </pre>
 * with {@code gate, up: nIn -> hiddenSize} and {@code down: hiddenSize -> nOut} (nOut = nIn unless set), each with
 * an optional bias ({@code bias}, off by default as in Llama, Mistral and Qwen2; Hugging Face's {@code mlp_bias}).
 *
 * <p>Input {@code [B, nIn, N]} (NCW, default) or {@code [B, N, nIn]} (NWC); output the same layout. A feature mask
 * zeroes the output at padded steps. Steps are independent, so the layer runs unchanged on a sequence-parallel
 * worker's shard. Parameters ({@link SwiGluParamInitializer}): {@code Wg [nIn, hidden]}, {@code Wu [nIn, hidden]},
 * {@code Wd [hidden, nOut]} and, with {@code bias}, {@code bg}, {@code bu}, {@code bd}.
 */
public class SwiGluLayer extends RecurrentFeedForwardLayer {

    private static final String NAME = "SwiGluLayer";

    private long hiddenSize;
    private boolean bias;

    /** For JSON deserialisation only; use {@link Builder}. */
    private SwiGluLayer() {
    }

    private SwiGluLayer(Builder b) {
        super(b);
        if (nOut == 0) {
            this.nOut = nIn;
        }
        this.hiddenSize = b.hiddenSize;
        this.bias = b.bias;
        initializeConstraints(b);
        validate(false);
    }

    /**
     * Checks the sizes and the activation (identity: the gate is the nonlinearity).
     *
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    @Override
    void validate(boolean complete) {
        String who = who();
        AttentionSettings.require(hiddenSize > 0, who + ": hiddenSize must be > 0, got " + hiddenSize);
        AttentionSettings.require(nIn >= 0 && nOut >= 0, who + ": nIn and nOut must be >= 0, got " + nIn + " and "
                + nOut);
        IActivation activation = getActivationFn();
        AttentionSettings.require(activation == null || activation instanceof ActivationIdentity, who
                + ": activation must be identity (SiLU gates inside), got " + activation);
        if (complete) {
            AttentionSettings.require(nIn > 0 && nOut > 0, who + ": nIn and nOut must be > 0, got " + nIn + " and "
                    + nOut + " (set them or give an input type)");
        }
    }

    @Override
    String layerType() {
        return NAME;
    }

    /** Takes the width from the input type; nOut follows nIn when it was not set apart. */
    @Override
    protected void takeWidth(long size, boolean override) {
        if (nIn <= 0 || override) {
            if (nOut == nIn || nOut <= 0) {
                this.nOut = size;
            }
            this.nIn = size;
        }
    }

    /** A {@link SwiGluLayerImpl}. */
    @Override
    protected Layer newImplementation(NeuralNetConfiguration conf, DataType dataType) {
        return new SwiGluLayerImpl(conf, dataType);
    }

    /** The {@link SwiGluParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return SwiGluParamInitializer.getInstance();
    }

    /** The gate, up and product rows and the output per step. */
    @Override
    protected long inferenceMemory(long steps) {
        return steps * (3 * hiddenSize + nOut);
    }

    /** Training keeps the input, gate, its sigmoid, up and product for backprop, and builds their gradients. */
    @Override
    protected long trainingMemory(long steps) {
        return 2 * steps * (nIn + 4 * hiddenSize + nOut);
    }

    /** The intermediate width of gate and up. */
    public long getHiddenSize() {
        return hiddenSize;
    }

    /** Sets the intermediate width (for JSON). */
    public void setHiddenSize(long hiddenSize) {
        this.hiddenSize = hiddenSize;
    }

    /** Whether gate, up and down add a bias. */
    public boolean isBias() {
        return bias;
    }

    /** Sets whether the projections add a bias (for JSON). */
    public void setBias(boolean bias) {
        this.bias = bias;
    }

    @Override
    public boolean equals(Object o) {
        if (o == this) {
            return true;
        }
        return o instanceof SwiGluLayer other && other.canEqual(this) && super.equals(o)
                && hiddenSize == other.hiddenSize && bias == other.bias;
    }

    @Override
    protected boolean canEqual(Object other) {
        return other instanceof SwiGluLayer;
    }

    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), hiddenSize, bias);
    }

    @Override
    public String toString() {
        return NAME + "(name=" + layerName + ", nIn=" + nIn + ", hiddenSize=" + hiddenSize + ", nOut=" + nOut
                + ", bias=" + bias + ", rnnDataFormat=" + getRnnDataFormat() + ")";
    }

    /** Builder of {@link SwiGluLayer}: nOut = nIn unless set, no biases, the input type's format or NCW. */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends RecurrentFeedForwardLayer.Builder<Builder> {
        private long hiddenSize;
        private boolean bias;

        /** A builder with the defaults above. */
        public Builder() {
        }

        /** The intermediate width of gate and up ({@code intermediate_size}). */
        public Builder hiddenSize(long hiddenSize) {
            this.hiddenSize = hiddenSize;
            return this;
        }

        /** Biases on gate, up and down (default false). */
        public Builder bias(boolean bias) {
            this.bias = bias;
            return this;
        }

        /**
         * The validated configuration.
         *
         * @throws IllegalArgumentException naming the offending setting, expected and actual value
         */
        @Override
        public SwiGluLayer build() {
            return new SwiGluLayer(this);
        }
    }
}
