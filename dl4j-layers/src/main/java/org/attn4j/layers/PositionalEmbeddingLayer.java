package org.attn4j.layers;

import java.util.Objects;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * Configuration of a learned absolute position embedding (GPT-2's {@code wpe}): a table {@code P [maxLength,
 * width]} whose row {@code p} is added to the features of the token at global position {@code p}.
 * <pre>
 *   out[b, t, :] = x[b, t, :] + P[pos_t, :]      pos_t = t on one device,
 *                                                pos_t = SequenceParallel.current().positions()[t] on a shard
 * </pre>
 * Input and output are {@code [B, width, N]} (NCW, default) or {@code [B, N, width]} (NWC); {@code nIn} and
 * {@code nOut} are both the width and must be equal. A DL4J feature mask {@code [B, N]} marks padded steps: they
 * pass through unchanged (no embedding is added) and add nothing to the gradient of {@code P}. A position at or
 * beyond {@code maxLength} fails the forward pass.
 *
 * <p>Because the positions come from the run-time {@link SequenceParallel} context, the same configuration serves
 * one device and every sequence layout (contiguous, zigzag, striped), where a worker's local steps are not
 * positions {@code 0..n-1}.
 *
 * <p>On one device, positions count from 0 in every forward pass, except under {@code rnnTimeStep}: there each call
 * continues from where the last one ended, until {@code rnnClearPreviousState} (incremental decoding). Truncated
 * BPTT's segments are embedded from position 0 each (the attn4j layers carry no state across training segments).
 *
 * <p>{@code P} is initialised from a normal distribution with mean 0 and standard deviation {@code initStd}
 * (default {@value #DEFAULT_INIT_STD}, as common GPT-2 implementations use for their embeddings), not from the
 * network's weight init, whose fan-in/fan-out rules mean nothing for a table indexed by position. {@code P} counts
 * as a weight: l1/l2/weight decay and weight noise configured for weights apply to it. The layer has no
 * activation (only identity is accepted) and no bias.
 *
 * <p>Serialises to JSON through DL4J's mechanism (class name as type id, bean properties {@code maxLength},
 * {@code initStd}, {@code rnnDataFormat} besides DL4J's own).
 */
public class PositionalEmbeddingLayer extends RecurrentFeedForwardLayer {

    /** The standard deviation {@code P} is drawn with unless set. */
    public static final double DEFAULT_INIT_STD = 0.02;

    private static final String NAME = "PositionalEmbeddingLayer";

    private int maxLength;
    private double initStd = DEFAULT_INIT_STD;

    /** For JSON deserialisation only; use {@link Builder}. */
    private PositionalEmbeddingLayer() {
    }

    private PositionalEmbeddingLayer(Builder b) {
        super(b);
        // the width is one number: either of nIn and nOut gives the other
        if (nOut == 0) {
            nOut = nIn;
        } else if (nIn == 0) {
            nIn = nOut;
        }
        this.maxLength = b.maxLength;
        this.initStd = b.initStd;
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
        AttentionSettings.require(maxLength > 0, who + ": maxLength must be > 0, got " + maxLength);
        AttentionSettings.require(initStd >= 0 && Double.isFinite(initStd),
                who + ": initStd must be finite and >= 0, got " + initStd);
        AttentionSettings.require(nIn >= 0, who + ": nIn must be > 0, got " + nIn);
        AttentionSettings.require(nOut >= 0, who + ": nOut must be > 0, got " + nOut);
        AttentionSettings.require(nIn == 0 || nOut == 0 || nIn == nOut, who + ": nOut (" + nOut
                + ") must equal nIn (" + nIn + "): the embedding is added to the input, so the width is unchanged");
        AttentionSettings.require(activationFn == null || activationFn instanceof ActivationIdentity,
                who + ": the output is input + P with no activation; activation must be identity, got "
                        + activationFn);
        if (complete) {
            AttentionSettings.require(nIn > 0, who + ": nIn must be > 0, got " + nIn
                    + " (set the width or give an input type)");
        }
    }

    /** {@code PositionalEmbeddingLayer}. */
    @Override
    String layerType() {
        return NAME;
    }

    /** The number of features per step, {@code nIn} (which equals {@code nOut}). */
    public long width() {
        return nIn;
    }

    /** The width is one number: nIn from the input type, and nOut with it where unset. */
    @Override
    protected void takeWidth(long size, boolean override) {
        if (nIn <= 0 || override) {
            this.nIn = size;
        }
        if (nOut <= 0 || override) {
            this.nOut = this.nIn;
        }
    }

    /** A {@link PositionalEmbeddingLayerImpl}. */
    @Override
    protected Layer newImplementation(NeuralNetConfiguration conf, DataType dataType) {
        return new PositionalEmbeddingLayerImpl(conf, dataType);
    }

    /** The {@link PositionalEmbeddingParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return PositionalEmbeddingParamInitializer.getInstance();
    }

    /** The output. */
    @Override
    protected long inferenceMemory(long steps) {
        return steps * nOut;
    }

    /** The output, the masked copy and the input gradient. */
    @Override
    protected long trainingMemory(long steps) {
        return 3 * steps * nOut;
    }

    /** The number of positions {@code P} holds: steps must sit at positions {@code 0 .. maxLength-1}. */
    public int getMaxLength() {
        return maxLength;
    }

    /** Sets the number of positions (for JSON). */
    public void setMaxLength(int maxLength) {
        this.maxLength = maxLength;
    }

    /** Standard deviation of the zero-mean normal {@code P} is initialised from. */
    public double getInitStd() {
        return initStd;
    }

    /** Sets the initial standard deviation (for JSON). */
    public void setInitStd(double initStd) {
        this.initStd = initStd;
    }

    /** Equal when the DL4J settings, maxLength, initStd and the layout are equal. */
    @Override
    public boolean equals(Object o) {
        if (o == this) {
            return true;
        }
        return o instanceof PositionalEmbeddingLayer other && other.canEqual(this) && super.equals(o)
                && maxLength == other.maxLength && Double.compare(initStd, other.initStd) == 0;
    }

    /** Only a PositionalEmbeddingLayer may equal this one. */
    @Override
    protected boolean canEqual(Object other) {
        return other instanceof PositionalEmbeddingLayer;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), maxLength, initStd);
    }

    /** The settings, for logs and messages. */
    @Override
    public String toString() {
        return NAME + "(name=" + layerName + ", width=" + nIn + ", maxLength=" + maxLength + ", initStd=" + initStd
                + ", rnnDataFormat=" + getRnnDataFormat() + ")";
    }

    /**
     * Builder for {@link PositionalEmbeddingLayer}. Set {@code maxLength} and the width ({@link #width}, or
     * {@code nIn} and/or {@code nOut}, which must agree; or leave it to the input type). Defaults: initStd
     * {@value PositionalEmbeddingLayer#DEFAULT_INIT_STD}, the input type's format or NCW, identity activation.
     */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends RecurrentFeedForwardLayer.Builder<Builder> {
        private int maxLength;
        private double initStd = DEFAULT_INIT_STD;

        /** A builder with the defaults above. */
        public Builder() {
        }

        /** The number of positions the table holds ({@code > 0}); the longest sequence it accepts. */
        public Builder maxLength(int maxLength) {
            this.maxLength = maxLength;
            return this;
        }

        /** The number of features per step: sets both nIn and nOut. */
        public Builder width(int width) {
            this.nIn = width;
            this.nOut = width;
            return this;
        }

        /** Standard deviation ({@code >= 0}) of the zero-mean normal {@code P} starts from. */
        public Builder initStd(double initStd) {
            this.initStd = initStd;
            return this;
        }

        /**
         * The validated configuration.
         *
         * @throws IllegalArgumentException naming the offending setting, expected and actual value
         */
        @Override
        public PositionalEmbeddingLayer build() {
            return new PositionalEmbeddingLayer(this);
        }
    }
}
