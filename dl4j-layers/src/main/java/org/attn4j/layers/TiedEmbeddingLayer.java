package org.attn4j.layers;

import java.util.Objects;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.params.EmptyParamInitializer;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * Configuration of a token embedding tied to an output layer: the input and output embeddings are one parameter,
 * the output layer's weights {@code W [width, vocab]} (DL4J's {@code RnnOutputLayer}, {@code OutputLayer} or
 * {@code DenseLayer}), as in Llama-family checkpoints with {@code tie_word_embeddings} and GPT-2.
 * <pre>
 *   out[b, :, t] = W[:, id[b, t]]                 the column of the token's id
 *   dL/dW[:, v] += sum over (b, t) with id = v of dL/dout[b, :, t]     added to the output layer's own gradient
 * </pre>
 * The layer holds no parameter: it reads {@code W} from the output layer named {@link #getHead() head}, and its
 * backward pass adds to that layer's gradient of {@code W} (which the output layer, nearer the loss, has written
 * by then). So the updater, ZeRO's partitions and checkpoints see one tensor. A network holding it must be bound
 * once it exists ({@link TiedEmbeddings#bind}); an unbound one fails its first forward pass in one line.
 *
 * <p>Input: token ids {@code [B, 1, N]} (NCW) or {@code [B, N, 1]} (NWC) as floating-point values; output
 * {@code [B, width, N]} or {@code [B, N, width]}. An id outside {@code [0, vocab)} fails the forward pass.
 * Serialises to JSON through DL4J's mechanism (bean properties {@code head}, {@code rnnDataFormat} besides DL4J's
 * own).
 */
public class TiedEmbeddingLayer extends RecurrentFeedForwardLayer {

    private static final String NAME = "TiedEmbeddingLayer";

    private String head;

    /** For JSON deserialisation only; use {@link Builder}. */
    private TiedEmbeddingLayer() {
    }

    private TiedEmbeddingLayer(Builder b) {
        super(b);
        this.nIn = 1;
        this.head = b.head;
        validate(false);
    }

    @Override
    void validate(boolean complete) {
        String who = who();
        AttentionSettings.require(head != null && !head.isBlank(), who + ": head (the name of the output layer "
                + "whose weights it shares) must be set, got " + head);
        AttentionSettings.require(nIn <= 1, who + ": the input is one token id per step (nIn 1), got nIn " + nIn);
        AttentionSettings.require(nOut >= 0, who + ": nOut must be > 0, got " + nOut);
        AttentionSettings.require(activationFn == null || activationFn instanceof ActivationIdentity,
                who + ": the output is a column of the head's weights; activation must be identity, got "
                        + activationFn);
        if (complete) {
            AttentionSettings.require(nOut > 0, who + ": nOut (the width) must be > 0, got " + nOut);
        }
    }

    @Override
    String layerType() {
        return NAME;
    }

    /** The input is one id per step, whatever the input type says. */
    @Override
    protected void takeWidth(long size, boolean override) {
        this.nIn = 1;
    }

    @Override
    protected Layer newImplementation(NeuralNetConfiguration conf, DataType dataType) {
        return new TiedEmbeddingLayerImpl(conf, dataType);
    }

    /** No parameters of its own. */
    @Override
    public ParamInitializer initializer() {
        return EmptyParamInitializer.getInstance();
    }

    /** The output. */
    @Override
    protected long inferenceMemory(long steps) {
        return steps * nOut;
    }

    /** The output and the gradient rows. */
    @Override
    protected long trainingMemory(long steps) {
        return 2 * steps * nOut;
    }

    /** The name of the output layer whose weights {@code [width, vocab]} this layer embeds with. */
    public String getHead() {
        return head;
    }

    /** Sets the head's name (for JSON). */
    public void setHead(String head) {
        this.head = head;
    }

    @Override
    public boolean equals(Object o) {
        if (o == this) {
            return true;
        }
        return o instanceof TiedEmbeddingLayer other && other.canEqual(this) && super.equals(o)
                && Objects.equals(head, other.head);
    }

    @Override
    protected boolean canEqual(Object other) {
        return other instanceof TiedEmbeddingLayer;
    }

    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), head);
    }

    @Override
    public String toString() {
        return NAME + "(name=" + layerName + ", width=" + nOut + ", head=" + head + ", rnnDataFormat="
                + getRnnDataFormat() + ")";
    }

    /** Builder for {@link TiedEmbeddingLayer}: the width ({@code nOut}) and the head's name. */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends RecurrentFeedForwardLayer.Builder<Builder> {
        private String head;

        /** A builder; set the width and the head. */
        public Builder() {
            this.nIn = 1;
        }

        /** The embedding width, the head's number of inputs. */
        public Builder width(int width) {
            this.nOut = width;
            return this;
        }

        /** The name of the output layer whose weights {@code [width, vocab]} it shares. */
        public Builder head(String head) {
            this.head = head;
            return this;
        }

        /**
         * The validated configuration.
         *
         * @throws IllegalArgumentException naming the offending setting
         */
        @Override
        public TiedEmbeddingLayer build() {
            return new TiedEmbeddingLayer(this);
        }
    }
}
