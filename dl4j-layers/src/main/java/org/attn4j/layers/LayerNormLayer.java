package org.attn4j.layers;

import java.util.Objects;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.nd4j.linalg.activations.IActivation;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * Configuration of a layer normalisation applied to every time step of a sequence on its own, for pre-norm
 * transformer blocks ({@code x + attention(norm(x))}, {@code x + mlp(norm(x))}) and a final norm.
 *
 * <p>Input {@code [B, width, N]} (NCW, default) or {@code [B, N, width]} (NWC); output the same shape. For every
 * example {@code b} and step {@code t}, over the {@code width} features {@code x = input[b, :, t]}:
 * <pre>
 *   LayerNorm (default):  y = g . (x - mean(x)) / sqrt(var(x) + eps) + b     (var biased: divided by width)
 *   RMSNorm (rms = true): y = g . x / sqrt(mean(x^2) + eps)                   (no mean subtraction, no bias)
 * </pre>
 * No step reads another, so a worker that holds only some steps of each sequence (sequence parallelism)
 * computes exactly its part of the output; the parameter gradients are sums over steps, to be summed over the
 * workers like any other layer's.
 *
 * <p>A DL4J feature mask {@code [B, N]} passes through unchanged to the next layer; the output at padded steps
 * is zero and they contribute nothing to the gradients. The activation is always the identity: a build with
 * any other is refused (put an {@code ActivationLayer} after the norm instead), and the network's default
 * activation does not reach this layer. Input dropout, when configured, applies as in DL4J's layers.
 *
 * <p>Parameters (see {@link LayerNormParamInitializer}): {@code g [1, width]}, starting at the layer's
 * {@code gainInit} (1 unless set), and, unless rms, {@code b [1, width]}, starting at 0. The network's weight init
 * and bias init do not apply to them, nor its weight regularisation and weight noise.
 *
 * <p>Serialises to JSON through DL4J's mechanism (class name as type id, bean properties {@code eps},
 * {@code rms}, {@code rnnDataFormat} besides DL4J's).
 */
public class LayerNormLayer extends RecurrentFeedForwardLayer {

    /** The default epsilon added to the variance (or mean square) inside the square root. */
    public static final double DEFAULT_EPS = 1e-5;

    private static final String NAME = "LayerNormLayer";

    private double eps = DEFAULT_EPS;
    private boolean rms;

    /** For JSON deserialisation only; use {@link Builder}. */
    private LayerNormLayer() {
    }

    private LayerNormLayer(Builder b) {
        super(b);
        if (nOut == 0) {
            this.nOut = nIn;
        }
        this.eps = b.eps;
        this.rms = b.rms;
        initializeConstraints(b);
        validate(false);
    }

    /**
     * Checks the settings; with {@code complete} also that the width is known.
     *
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    @Override
    void validate(boolean complete) {
        String who = who();
        AttentionSettings.require(nIn >= 0, who + ": nIn must be > 0, got " + nIn);
        AttentionSettings.require(nOut == nIn, who + ": nOut (" + nOut
                + ") must equal nIn (" + nIn + "); the norm keeps the width, so set nIn only");
        AttentionSettings.require(eps > 0 && Double.isFinite(eps), who + ": eps must be finite and > 0, got " + eps);
        IActivation activation = getActivationFn();
        AttentionSettings.require(activation == null || activation instanceof ActivationIdentity, who
                + ": activation must be identity, got " + activation + "; put an ActivationLayer after the norm");
        if (complete) {
            AttentionSettings.require(nIn > 0, who + ": nIn must be > 0, got " + nIn
                    + " (set it or give an input type)");
        }
    }

    /** {@code LayerNormLayer}. */
    @Override
    String layerType() {
        return NAME;
    }

    /** The number of features normalised per step, {@code nIn} (= {@code nOut}). */
    public long width() {
        return nIn;
    }

    /** The width is one number: the input type sets nIn and nOut together. */
    @Override
    protected void takeWidth(long size, boolean override) {
        if (nIn <= 0 || override) {
            this.nIn = size;
            this.nOut = size;
        }
    }

    /** A {@link LayerNormLayerImpl}. */
    @Override
    protected Layer newImplementation(NeuralNetConfiguration conf, DataType dataType) {
        return new LayerNormLayerImpl(conf, dataType);
    }

    /** The {@link LayerNormParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return LayerNormParamInitializer.getInstance();
    }

    /** The normalised rows and the output. */
    @Override
    protected long inferenceMemory(long steps) {
        return 2 * steps * nIn;
    }

    /** Besides those, the statistics kept for backprop and the input gradient. */
    @Override
    protected long trainingMemory(long steps) {
        return steps * (4 * nIn + 1);
    }

    /** The epsilon inside the square root, {@code > 0}. */
    public double getEps() {
        return eps;
    }

    /** Sets the epsilon inside the square root (for JSON). */
    public void setEps(double eps) {
        this.eps = eps;
    }

    /** Whether this is RMSNorm (no mean subtraction, no bias) rather than LayerNorm. */
    public boolean isRms() {
        return rms;
    }

    /** Sets RMSNorm rather than LayerNorm (for JSON). */
    public void setRms(boolean rms) {
        this.rms = rms;
    }

    /** Equal when the DL4J settings, the layout, {@code eps} and {@code rms} are equal. */
    @Override
    public boolean equals(Object o) {
        if (o == this) {
            return true;
        }
        return o instanceof LayerNormLayer other && other.canEqual(this) && super.equals(o)
                && Double.compare(eps, other.eps) == 0 && rms == other.rms;
    }

    /** Only a LayerNormLayer may equal this one. */
    @Override
    protected boolean canEqual(Object other) {
        return other instanceof LayerNormLayer;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), eps, rms);
    }

    /** The settings, for logs and messages. */
    @Override
    public String toString() {
        return NAME + "(name=" + layerName + ", width=" + nIn + ", eps=" + eps + ", rms=" + rms
                + ", rnnDataFormat=" + getRnnDataFormat() + ")";
    }

    /**
     * Builder for {@link LayerNormLayer}. Set {@code nIn} (the width; nOut follows it and, if set, must equal
     * it) or let the input type give it. Defaults: LayerNorm (not rms), eps {@value #DEFAULT_EPS}, the input
     * type's format or NCW, identity activation.
     */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends RecurrentFeedForwardLayer.Builder<Builder> {
        private double eps = DEFAULT_EPS;
        private boolean rms;

        /** A builder with the defaults above. */
        public Builder() {
        }

        /** A builder for {@code width} features per step ({@code nIn = nOut = width}). */
        public Builder(long width) {
            this();
            nIn(width);
        }

        /** The epsilon added inside the square root ({@code > 0}); default {@value #DEFAULT_EPS}. */
        public Builder eps(double eps) {
            this.eps = eps;
            return this;
        }

        /** RMSNorm: {@code y = g . x / sqrt(mean(x^2) + eps)}, no mean subtraction and no bias; default false. */
        public Builder rms(boolean rms) {
            this.rms = rms;
            return this;
        }

        /**
         * The validated configuration.
         *
         * @throws IllegalArgumentException naming the offending setting, expected and actual value
         */
        @Override
        public LayerNormLayer build() {
            return new LayerNormLayer(this);
        }
    }
}
