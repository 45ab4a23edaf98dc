package org.attn4j.layers;

import java.util.Arrays;
import java.util.Objects;

import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.nd4j.linalg.api.buffer.DataType;

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
public class LinearAttentionLayer extends AttentionLayerBase {

    /** The epsilon inside the RMS norm's square root. */
    public static final double NORM_EPS = 1e-6;

    private static final String NAME = "LinearAttentionLayer";

    /** Fixed (or initial, when learned) lambda per query head or one for all; null means TransNormerLLM's. */
    private double[] decay;
    private boolean learnDecay;
    /** Positions per chunk of the op; 0 means {@link LinearAttention#DEFAULT_CHUNK}. */
    private int chunkSize;

    /** For JSON deserialisation only; use {@link Builder}. */
    private LinearAttentionLayer() {
        super(NAME);
    }

    private LinearAttentionLayer(Builder b) {
        super(NAME, b);
        this.decay = b.decay == null ? null : b.decay.clone();
        this.learnDecay = b.learnDecay;
        this.chunkSize = b.chunkSize;
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
        boolean causal = isCausal();
        AttentionSettings.require(chunkSize >= 0, who + ": chunkSize must be >= 1 (or 0 for the op's default "
                + LinearAttention.DEFAULT_CHUNK + "), got " + chunkSize);
        if (decay != null) {
            AttentionSettings.require(causal, who + ": decay " + Arrays.toString(decay) + " needs causal "
                    + "attention; non-causal linear attention has no decay (lambda = 1): drop decay or set causal");
            AttentionSettings.require(decay.length == 1 || decay.length == getNHeads(), who + ": decay must have 1 "
                    + "or nHeads (" + getNHeads() + ") values, got " + decay.length);
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

    /** The op's chunk size in use: {@code chunkSize} if set, else {@link LinearAttention#DEFAULT_CHUNK}. */
    public int effectiveChunkSize() {
        return chunkSize > 0 ? chunkSize : LinearAttention.DEFAULT_CHUNK;
    }

    /**
     * The decay in use when fixed, its starting value when learned: none when not causal, else the configured
     * values, else TransNormerLLM's slopes for {@code nHeads} heads.
     */
    public Decay configuredDecay() {
        if (!isCausal()) {
            return Decay.none();
        }
        return decay == null ? Decay.transNormerSlopes(getNHeads()) : Decay.perHead(decay);
    }

    /** A {@link LinearAttentionLayerImpl}. */
    @Override
    protected Layer newImplementation(NeuralNetConfiguration conf, DataType dataType) {
        return new LinearAttentionLayerImpl(conf, dataType);
    }

    /** The {@link LinearAttentionParamInitializer}. */
    @Override
    public ParamInitializer initializer() {
        return LinearAttentionParamInitializer.getInstance();
    }

    /** The projections, norm and output per step, and the per-chunk states. */
    @Override
    protected long inferenceMemory(long steps) {
        return steps * activationsPerStep() + chunkStates(steps);
    }

    /**
     * Training keeps q, k, v, o, the norm's input and output and the input for backprop, and the cached states
     * entering each chunk (LASP section 2.3), and builds their gradients.
     */
    @Override
    protected long trainingMemory(long steps) {
        long hs = effectiveHeadSize();
        return 2 * (steps * (activationsPerStep() + 2L * getNHeads() * hs + nIn) + chunkStates(steps));
    }

    /** Elements of the states entering each chunk, {@code hs x hs} per query head. */
    private long chunkStates(long steps) {
        long hs = effectiveHeadSize();
        long chunks = (steps + effectiveChunkSize() - 1) / effectiveChunkSize();
        return chunks * getNHeads() * hs * hs;
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

    /** Equal when the DL4J settings and every attention setting are equal. */
    @Override
    public boolean equals(Object o) {
        return o instanceof LinearAttentionLayer other && super.equals(o) && Arrays.equals(decay, other.decay)
                && learnDecay == other.learnDecay && chunkSize == other.chunkSize;
    }

    /** Only a LinearAttentionLayer may equal this one. */
    @Override
    protected boolean canEqual(Object other) {
        return other instanceof LinearAttentionLayer;
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), Arrays.hashCode(decay), learnDecay, chunkSize);
    }

    /** {@code decay}, {@code learnDecay} and {@code chunkSize}. */
    @Override
    protected String ownSettings() {
        return ", decay=" + (decay == null ? "TransNormerLLM slopes" : Arrays.toString(decay))
                + ", learnDecay=" + learnDecay + ", chunkSize=" + effectiveChunkSize();
    }

    /**
     * Builder for {@link LinearAttentionLayer}. Defaults: nKvHeads = nHeads, headSize = nOut / nHeads, causal,
     * TransNormerLLM's fixed slopes, the op's chunk size, the input type's format or NCW, identity activation,
     * norm gain starting at {@code gainInit} (1).
     */
    // unchecked: DL4J declares build() as the generic <E extends Layer> E build(); javac flags the override
    @SuppressWarnings("unchecked")
    public static class Builder extends AttentionLayerBase.Builder<Builder> {
        private double[] decay;
        private boolean learnDecay;
        private int chunkSize;

        /** A builder with the defaults above. */
        public Builder() {
            // causal is the decayed recurrence over earlier steps; non-causal, every step sees all steps
            this.causal = true;
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
