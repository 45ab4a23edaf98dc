package org.attn4j.ops.rope;

import java.io.Serializable;
import java.util.Locale;
import java.util.Objects;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.annotation.JsonCreator;
import org.nd4j.shade.jackson.annotation.JsonIgnore;
import org.nd4j.shade.jackson.annotation.JsonProperty;

/**
 * Rotary position embedding (RoPE; Su et al., "RoFormer", 2021): rotates each query and key vector by angles
 * proportional to its position, so that their dot product depends only on the distance between the positions.
 *
 * <p>Of a head's {@code D} features, the first {@code r = int(D * partialRotaryFactor)} rotate (the rest pass
 * through), as {@code r / 2} pairs; pair {@code i} at position {@code p} turns by {@code p * invFreq[i]}. The pairs
 * are {@code (i, i + r/2)} in the {@link Layout#HALF} layout (Hugging Face's "rotate half") and {@code (2i, 2i+1)} in
 * the {@link Layout#INTERLEAVED} one (GPT-J, Meta's original Llama). The inverse frequencies and the factor on cos and
 * sin follow transformers' {@code modeling_rope_utils} for each {@link Scaling}: {@code default}
 * ({@code invFreq[i] = theta^(-2i/r)}), {@code linear} (divided by {@code factor}), {@code dynamic} (NTK: theta grows
 * with the sequence length once it exceeds {@code maxPositions}), {@code llama3} (low frequencies divided by
 * {@code factor}, a smooth ramp between {@code lowFreqFactor} and {@code highFreqFactor}), and {@code yarn} (a ramp
 * between interpolated and extrapolated frequencies from {@code betaFast} and {@code betaSlow} rotations, and the
 * attention factor {@code 0.1 ln(factor) + 1}, or {@code mscale}'s ratio, on cos and sin). Angles are computed in
 * float64 and cast to the array's type at the end.
 *
 * <p>Positions are global (the caller passes them: a sequence-parallel worker its shard's, a decoding step the ones
 * after its cache, packed documents their own, restarting or not), so the rotation never depends on how a sequence
 * is split. The backward pass of a rotation is the inverse rotation ({@link #rotateBack}).
 *
 * <p>Immutable; serialises to JSON with the layer that holds it.
 */
public final class RotaryEmbedding implements Serializable {

    private static final long serialVersionUID = 1L;

    /** Which features form a rotating pair. */
    public enum Layout {
        /** {@code (i, i + r/2)}: Hugging Face's rotate-half convention. */
        HALF,
        /** {@code (2i, 2i + 1)}: GPT-J's and Meta's original convention. */
        INTERLEAVED
    }

    /** How the frequencies are scaled for longer contexts ({@code rope_type} in Hugging Face's configs). */
    public enum Scaling {
        /** No scaling. */
        DEFAULT,
        /** Position interpolation: every frequency divided by {@code factor}. */
        LINEAR,
        /** NTK-aware scaling from the sequence length, once beyond {@code maxPositions}. */
        DYNAMIC,
        /** Llama 3.1's: low frequencies divided by {@code factor}, high ones kept, a smooth ramp between. */
        LLAMA3,
        /** YaRN: a ramp between interpolated and extrapolated frequencies, and an attention factor. */
        YARN;

        /** The name in Hugging Face's configs. */
        public String hfName() {
            return name().toLowerCase(Locale.ROOT);
        }

        /**
         * The scaling of a Hugging Face name ({@code default}, {@code linear}, {@code dynamic}, {@code llama3},
         * {@code yarn}).
         *
         * @throws IllegalArgumentException naming the supported ones
         */
        public static Scaling ofHfName(String name) {
            for (Scaling s : values()) {
                if (s.hfName().equals(name)) {
                    return s;
                }
            }
            throw new IllegalArgumentException("rope type must be one of default, linear, dynamic, llama3, yarn; got "
                    + name);
        }
    }

    private final double theta;
    private final double partialRotaryFactor;
    private final Layout layout;
    private final Scaling scaling;
    private final double factor;
    private final int maxPositions;
    private final int originalMaxPositions;
    private final double lowFreqFactor;
    private final double highFreqFactor;
    private final double betaFast;
    private final double betaSlow;
    private final Double attentionFactor;
    private final Double mscale;
    private final Double mscaleAllDim;
    private final boolean truncate;
    private final FrequencyPrecision frequencyPrecision;

    /**
     * The precision the inverse frequencies are held in. Hugging Face transformers keeps them in a buffer of the
     * model's dtype: a model loaded in bfloat16 (or float16) turns with frequencies rounded to it, even when later
     * run in float32; to reproduce such a model exactly, hold them likewise.
     */
    public enum FrequencyPrecision {
        /** Exact (float64), the default. */
        FLOAT64,
        /** Rounded to bfloat16 (nearest even). */
        BFLOAT16,
        /** Rounded to IEEE half precision (nearest even). */
        FLOAT16;

        /** {@code x} (a positive frequency) as float32 first, as transformers computes it, then held. */
        double round(double x) {
            return switch (this) {
                case FLOAT64 -> x;
                case BFLOAT16 -> nearestEven((float) x, 7, -126);
                case FLOAT16 -> nearestEven((float) x, 10, -14);
            };
        }

        /** The nearest value with {@code mantissa} bits (ties to even), subnormal below {@code 2^minExponent}. */
        private static double nearestEven(double x, int mantissa, int minExponent) {
            if (x == 0 || !Double.isFinite(x)) {
                return x;
            }
            int e = Math.max(Math.getExponent(Math.abs(x)), minExponent);
            double quantum = Math.scalb(1.0, e - mantissa);
            return Math.rint(x / quantum) * quantum;
        }
    }

    @JsonCreator
    private RotaryEmbedding(@JsonProperty("theta") double theta,
                            @JsonProperty("partialRotaryFactor") double partialRotaryFactor,
                            @JsonProperty("layout") Layout layout, @JsonProperty("scaling") Scaling scaling,
                            @JsonProperty("factor") double factor, @JsonProperty("maxPositions") int maxPositions,
                            @JsonProperty("originalMaxPositions") int originalMaxPositions,
                            @JsonProperty("lowFreqFactor") double lowFreqFactor,
                            @JsonProperty("highFreqFactor") double highFreqFactor,
                            @JsonProperty("betaFast") double betaFast, @JsonProperty("betaSlow") double betaSlow,
                            @JsonProperty("attentionFactor") Double attentionFactor,
                            @JsonProperty("mscale") Double mscale, @JsonProperty("mscaleAllDim") Double mscaleAllDim,
                            @JsonProperty("truncate") boolean truncate,
                            @JsonProperty("frequencyPrecision") FrequencyPrecision frequencyPrecision) {
        this.theta = theta;
        this.partialRotaryFactor = partialRotaryFactor;
        this.layout = layout == null ? Layout.HALF : layout;
        this.scaling = scaling == null ? Scaling.DEFAULT : scaling;
        this.factor = factor;
        this.maxPositions = maxPositions;
        this.originalMaxPositions = originalMaxPositions;
        this.lowFreqFactor = lowFreqFactor;
        this.highFreqFactor = highFreqFactor;
        this.betaFast = betaFast;
        this.betaSlow = betaSlow;
        this.attentionFactor = attentionFactor;
        this.mscale = mscale;
        this.mscaleAllDim = mscaleAllDim;
        this.truncate = truncate;
        this.frequencyPrecision = frequencyPrecision == null ? FrequencyPrecision.FLOAT64 : frequencyPrecision;
        validate();
    }

    private RotaryEmbedding(Builder b) {
        this(b.theta, b.partialRotaryFactor, b.layout, b.scaling, b.factor, b.maxPositions, b.originalMaxPositions,
                b.lowFreqFactor, b.highFreqFactor, b.betaFast, b.betaSlow, b.attentionFactor, b.mscale,
                b.mscaleAllDim, b.truncate, b.frequencyPrecision);
    }

    /** A builder: theta 10000, every feature rotating, {@link Layout#HALF}, no scaling. */
    public static Builder builder() {
        return new Builder();
    }

    /** The default rotation with base {@code theta}. */
    public static RotaryEmbedding of(double theta) {
        return builder().theta(theta).build();
    }

    private void validate() {
        require(theta > 1 && Double.isFinite(theta), "theta must be finite and > 1, got " + theta);
        require(partialRotaryFactor > 0 && partialRotaryFactor <= 1,
                "partialRotaryFactor must be in (0, 1], got " + partialRotaryFactor);
        if (scaling != Scaling.DEFAULT) {
            require(factor > 0 && Double.isFinite(factor), scaling.hfName() + " scaling needs a factor > 0, got "
                    + factor);
        }
        if (scaling == Scaling.DYNAMIC) {
            require(maxPositions > 0, "dynamic scaling needs maxPositions (max_position_embeddings) > 0, got "
                    + maxPositions);
        }
        if (scaling == Scaling.LLAMA3) {
            require(originalMaxPositions > 0, "llama3 scaling needs originalMaxPositions > 0, got "
                    + originalMaxPositions);
            require(highFreqFactor > lowFreqFactor && lowFreqFactor > 0, "llama3 scaling needs 0 < lowFreqFactor < "
                    + "highFreqFactor, got " + lowFreqFactor + " and " + highFreqFactor);
        }
        if (scaling == Scaling.YARN) {
            require(originalMaxPositions > 0, "yarn scaling needs originalMaxPositions > 0, got "
                    + originalMaxPositions);
            require(betaFast > 0 && betaSlow > 0, "yarn scaling needs betaFast and betaSlow > 0, got " + betaFast
                    + " and " + betaSlow);
        }
    }

    private static void require(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException("RotaryEmbedding: " + message);
        }
    }

    /**
     * The rotating features of a head of {@code headSize}: {@code int(headSize * partialRotaryFactor)}.
     *
     * @throws IllegalArgumentException if that is not a positive even number
     */
    public int rotaryDims(int headSize) {
        int r = (int) (headSize * partialRotaryFactor);
        if (r < 2 || r % 2 != 0) {
            throw new IllegalArgumentException("RotaryEmbedding: a head of " + headSize + " features with "
                    + "partialRotaryFactor " + partialRotaryFactor + " rotates " + r + " features; that must be a "
                    + "positive even number");
        }
        return r;
    }

    /**
     * The inverse frequencies of the {@code r / 2} pairs, in float64.
     *
     * @param headSize       the head's features
     * @param sequenceLength the global length of the sequence being processed (used by {@link Scaling#DYNAMIC})
     */
    public double[] inverseFrequencies(int headSize, int sequenceLength) {
        int r = rotaryDims(headSize);
        int pairs = r / 2;
        double base = theta;
        if (scaling == Scaling.DYNAMIC) {
            double len = Math.max(sequenceLength, maxPositions);
            base = theta * Math.pow(factor * len / maxPositions - (factor - 1), (double) r / (r - 2));
        }
        double[] inv = new double[pairs];
        for (int i = 0; i < pairs; i++) {
            inv[i] = 1.0 / Math.pow(base, 2.0 * i / r);
        }
        switch (scaling) {
            case LINEAR -> {
                for (int i = 0; i < pairs; i++) {
                    inv[i] /= factor;
                }
            }
            case LLAMA3 -> llama3(inv);
            case YARN -> yarn(inv, r);
            default -> {
            }
        }
        for (int i = 0; i < pairs; i++) {
            inv[i] = frequencyPrecision.round(inv[i]);
        }
        return inv;
    }

    private void llama3(double[] inv) {
        double lowFreqWavelength = originalMaxPositions / lowFreqFactor;
        double highFreqWavelength = originalMaxPositions / highFreqFactor;
        for (int i = 0; i < inv.length; i++) {
            double wavelength = 2 * Math.PI / inv[i];
            if (wavelength > lowFreqWavelength) {
                inv[i] = inv[i] / factor;
            } else if (wavelength >= highFreqWavelength) {
                double smooth = (originalMaxPositions / wavelength - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
                inv[i] = (1 - smooth) * inv[i] / factor + smooth * inv[i];
            }
        }
    }

    private void yarn(double[] inv, int r) {
        double low = correctionDim(betaFast, r);
        double high = correctionDim(betaSlow, r);
        if (truncate) {
            low = Math.floor(low);
            high = Math.ceil(high);
        }
        low = Math.max(low, 0);
        high = Math.min(high, r - 1);
        if (low == high) {
            high += 0.001;
        }
        for (int i = 0; i < inv.length; i++) {
            double ramp = Math.min(1, Math.max(0, (i - low) / (high - low)));
            double extrapolation = 1 - ramp;
            double interpolated = inv[i] / factor;
            inv[i] = interpolated * (1 - extrapolation) + inv[i] * extrapolation;
        }
    }

    /** The pair index at which a frequency turns {@code rotations} times over the original context (YaRN). */
    private double correctionDim(double rotations, int r) {
        return r * Math.log(originalMaxPositions / (rotations * 2 * Math.PI)) / (2 * Math.log(theta));
    }

    /** The factor on cos and sin: YaRN's attention factor, 1 for every other scaling. */
    @JsonIgnore
    public double cosSinFactor() {
        if (scaling != Scaling.YARN) {
            return 1;
        }
        if (attentionFactor != null) {
            return attentionFactor;
        }
        if (mscale != null && mscaleAllDim != null && mscale != 0 && mscaleAllDim != 0) {
            return yarnMscale(factor, mscale) / yarnMscale(factor, mscaleAllDim);
        }
        return yarnMscale(factor, 1);
    }

    private static double yarnMscale(double scale, double m) {
        return scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1;
    }

    /**
     * The cos and sin of every position's angles, times {@link #cosSinFactor()}.
     *
     * @param headSize       the head's features
     * @param positions      global positions: one row for every sequence of the batch, or one row shared by all
     * @param sequenceLength the global sequence length (for {@link Scaling#DYNAMIC})
     */
    public Table table(int headSize, int[][] positions, int sequenceLength) {
        double[] inv = inverseFrequencies(headSize, sequenceLength);
        double f = cosSinFactor();
        int rows = positions.length;
        int n = positions[0].length;
        int pairs = inv.length;
        double[] cos = new double[rows * n * pairs];
        double[] sin = new double[rows * n * pairs];
        for (int b = 0; b < rows; b++) {
            if (positions[b].length != n) {
                throw new IllegalArgumentException("RotaryEmbedding: every row of positions needs " + n
                        + " entries, row " + b + " has " + positions[b].length);
            }
            for (int t = 0; t < n; t++) {
                int at = (b * n + t) * pairs;
                for (int i = 0; i < pairs; i++) {
                    double angle = positions[b][t] * inv[i];
                    cos[at + i] = Math.cos(angle) * f;
                    sin[at + i] = Math.sin(angle) * f;
                }
            }
        }
        return new Table(rows, n, headSize, pairs * 2, cos, sin);
    }

    /**
     * {@code x [B, H, n, D]} rotated: a new array of the same type and shape.
     *
     * @throws IllegalArgumentException if the shape does not fit the table
     */
    public INDArray rotate(INDArray x, Table table) {
        return apply(x, table, 1);
    }

    /**
     * The inverse (transposed) rotation of {@code dy [B, H, n, D]}, times the cos/sin factor: the gradient with
     * respect to the input of {@link #rotate} given the gradient {@code dy} of its output.
     */
    public INDArray rotateBack(INDArray dy, Table table) {
        return apply(dy, table, -1);
    }

    /**
     * Rotates {@code heads} heads of one step in place: {@code x} holds them one after the other from
     * {@code offset}, {@code D} values each, and {@code table} covers that one step ({@link #table} of a single
     * position). For a decoding step's few hundred values, without an array round trip.
     *
     * @throws IllegalArgumentException if the table is not of one step of this head size, or x is too short
     */
    public void rotateInPlace(double[] x, int offset, int heads, Table table) {
        if (table.rows != 1 || table.n != 1 || offset < 0 || x.length < offset + (long) heads * table.headSize) {
            throw new IllegalArgumentException("RotaryEmbedding: rotateInPlace needs a table of one step and "
                    + heads + " x " + table.headSize + " values from " + offset + ", got a table of " + table.rows
                    + " x " + table.n + " steps and " + x.length + " values");
        }
        boolean half = layout == Layout.HALF;
        int pairs = table.rotary / 2;
        for (int h = 0; h < heads; h++) {
            int base = offset + h * table.headSize;
            for (int i = 0; i < pairs; i++) {
                int a = half ? base + i : base + 2 * i;
                int c = half ? base + i + pairs : base + 2 * i + 1;
                double xa = x[a];
                double xc = x[c];
                x[a] = xa * table.cos[i] - xc * table.sin[i];
                x[c] = xc * table.cos[i] + xa * table.sin[i];
            }
        }
    }

    private INDArray apply(INDArray x, Table t, int direction) {
        if (x.rank() != 4 || x.size(2) != t.n || x.size(3) != t.headSize
                || (t.rows != 1 && x.size(0) != t.rows)) {
            throw new IllegalArgumentException("RotaryEmbedding: expected [B, H, " + t.n + ", " + t.headSize + "]"
                    + (t.rows != 1 ? " with B = " + t.rows : "") + ", got " + java.util.Arrays.toString(x.shape()));
        }
        int batch = (int) x.size(0);
        int heads = (int) x.size(1);
        int n = t.n;
        int d = t.headSize;
        int pairs = t.rotary / 2;
        boolean half = layout == Layout.HALF;
        double[] in = x.dup('c').data().asDouble();
        double[] out = in.clone();
        for (int b = 0; b < batch; b++) {
            int row = t.rows == 1 ? 0 : b;
            for (int h = 0; h < heads; h++) {
                for (int s = 0; s < n; s++) {
                    int base = ((b * heads + h) * n + s) * d;
                    int at = (row * n + s) * pairs;
                    for (int i = 0; i < pairs; i++) {
                        int a = half ? base + i : base + 2 * i;
                        int c = half ? base + i + pairs : base + 2 * i + 1;
                        double cos = t.cos[at + i];
                        double sin = direction * t.sin[at + i];
                        out[a] = in[a] * cos - in[c] * sin;
                        out[c] = in[c] * cos + in[a] * sin;
                    }
                }
            }
        }
        DataType type = x.dataType();
        return Nd4j.create(out, x.shape(), 'c').castTo(type);
    }

    /** The cos and sin of a batch's positions ({@link #table}). */
    public static final class Table {
        private final int rows;
        private final int n;
        private final int headSize;
        private final int rotary;
        private final double[] cos;
        private final double[] sin;

        private Table(int rows, int n, int headSize, int rotary, double[] cos, double[] sin) {
            this.rows = rows;
            this.n = n;
            this.headSize = headSize;
            this.rotary = rotary;
            this.cos = cos;
            this.sin = sin;
        }

        /** The time steps it covers. */
        public int length() {
            return n;
        }
    }

    /** Base of the frequencies ({@code rope_theta}). */
    @JsonProperty
    public double getTheta() {
        return theta;
    }

    /** The fraction of each head's features that rotate ({@code partial_rotary_factor}). */
    @JsonProperty
    public double getPartialRotaryFactor() {
        return partialRotaryFactor;
    }

    /** Which features pair up. */
    @JsonProperty
    public Layout getLayout() {
        return layout;
    }

    /** The frequency scaling. */
    @JsonProperty
    public Scaling getScaling() {
        return scaling;
    }

    /** The scaling factor (unused by {@link Scaling#DEFAULT}). */
    @JsonProperty
    public double getFactor() {
        return factor;
    }

    /** {@code max_position_embeddings}: where {@link Scaling#DYNAMIC} starts to scale. */
    @JsonProperty
    public int getMaxPositions() {
        return maxPositions;
    }

    /** {@code original_max_position_embeddings} of {@link Scaling#LLAMA3} and {@link Scaling#YARN}. */
    @JsonProperty
    public int getOriginalMaxPositions() {
        return originalMaxPositions;
    }

    /** {@code low_freq_factor} of {@link Scaling#LLAMA3}. */
    @JsonProperty
    public double getLowFreqFactor() {
        return lowFreqFactor;
    }

    /** {@code high_freq_factor} of {@link Scaling#LLAMA3}. */
    @JsonProperty
    public double getHighFreqFactor() {
        return highFreqFactor;
    }

    /** {@code beta_fast} of {@link Scaling#YARN}. */
    @JsonProperty
    public double getBetaFast() {
        return betaFast;
    }

    /** {@code beta_slow} of {@link Scaling#YARN}. */
    @JsonProperty
    public double getBetaSlow() {
        return betaSlow;
    }

    /** {@code attention_factor} of {@link Scaling#YARN}, or null for the one from {@code factor}. */
    @JsonProperty
    public Double getAttentionFactor() {
        return attentionFactor;
    }

    /** {@code mscale} of {@link Scaling#YARN}, or null. */
    @JsonProperty
    public Double getMscale() {
        return mscale;
    }

    /** {@code mscale_all_dim} of {@link Scaling#YARN}, or null. */
    @JsonProperty
    public Double getMscaleAllDim() {
        return mscaleAllDim;
    }

    /** {@code truncate} of {@link Scaling#YARN}: whether the ramp's ends are rounded to whole pairs. */
    @JsonProperty
    public boolean isTruncate() {
        return truncate;
    }

    /** The precision the inverse frequencies are held in ({@link FrequencyPrecision}). */
    @JsonProperty
    public FrequencyPrecision getFrequencyPrecision() {
        return frequencyPrecision;
    }

    /** A builder with every setting of this one. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.theta = theta;
        b.partialRotaryFactor = partialRotaryFactor;
        b.layout = layout;
        b.scaling = scaling;
        b.factor = factor;
        b.maxPositions = maxPositions;
        b.originalMaxPositions = originalMaxPositions;
        b.lowFreqFactor = lowFreqFactor;
        b.highFreqFactor = highFreqFactor;
        b.betaFast = betaFast;
        b.betaSlow = betaSlow;
        b.attentionFactor = attentionFactor;
        b.mscale = mscale;
        b.mscaleAllDim = mscaleAllDim;
        b.truncate = truncate;
        b.frequencyPrecision = frequencyPrecision;
        return b;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof RotaryEmbedding r && theta == r.theta && partialRotaryFactor == r.partialRotaryFactor
                && layout == r.layout && scaling == r.scaling && factor == r.factor && maxPositions == r.maxPositions
                && originalMaxPositions == r.originalMaxPositions && lowFreqFactor == r.lowFreqFactor
                && highFreqFactor == r.highFreqFactor && betaFast == r.betaFast && betaSlow == r.betaSlow
                && Objects.equals(attentionFactor, r.attentionFactor) && Objects.equals(mscale, r.mscale)
                && Objects.equals(mscaleAllDim, r.mscaleAllDim) && truncate == r.truncate
                && frequencyPrecision == r.frequencyPrecision;
    }

    @Override
    public int hashCode() {
        return Objects.hash(theta, partialRotaryFactor, layout, scaling, factor, maxPositions, originalMaxPositions,
                lowFreqFactor, highFreqFactor, betaFast, betaSlow, attentionFactor, mscale, mscaleAllDim, truncate,
                frequencyPrecision);
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder("RoPE(theta=").append(theta);
        if (partialRotaryFactor != 1) {
            s.append(", partial=").append(partialRotaryFactor);
        }
        s.append(", ").append(layout.name().toLowerCase(Locale.ROOT));
        if (scaling != Scaling.DEFAULT) {
            s.append(", ").append(scaling.hfName()).append(" x").append(factor);
        }
        if (frequencyPrecision != FrequencyPrecision.FLOAT64) {
            s.append(", frequencies in ").append(frequencyPrecision.name().toLowerCase(Locale.ROOT));
        }
        return s.append(')').toString();
    }

    /** Builder of {@link RotaryEmbedding}; the defaults are those of {@link #builder()}. */
    public static final class Builder {
        private double theta = 10000;
        private double partialRotaryFactor = 1;
        private Layout layout = Layout.HALF;
        private Scaling scaling = Scaling.DEFAULT;
        private double factor = 1;
        private int maxPositions;
        private int originalMaxPositions;
        private double lowFreqFactor = 1;
        private double highFreqFactor = 4;
        private double betaFast = 32;
        private double betaSlow = 1;
        private Double attentionFactor;
        private Double mscale;
        private Double mscaleAllDim;
        private boolean truncate = true;
        private FrequencyPrecision frequencyPrecision = FrequencyPrecision.FLOAT64;

        private Builder() {
        }

        /** {@code rope_theta} (default 10000). */
        public Builder theta(double theta) {
            this.theta = theta;
            return this;
        }

        /** {@code partial_rotary_factor} (default 1: every feature rotates). */
        public Builder partialRotaryFactor(double fraction) {
            this.partialRotaryFactor = fraction;
            return this;
        }

        /** The pairing (default {@link Layout#HALF}). */
        public Builder layout(Layout layout) {
            this.layout = layout;
            return this;
        }

        /** The scaling and its factor. */
        public Builder scaling(Scaling scaling, double factor) {
            this.scaling = scaling;
            this.factor = factor;
            return this;
        }

        /** {@code max_position_embeddings} (for {@link Scaling#DYNAMIC}). */
        public Builder maxPositions(int maxPositions) {
            this.maxPositions = maxPositions;
            return this;
        }

        /** {@code original_max_position_embeddings} (for {@link Scaling#LLAMA3} and {@link Scaling#YARN}). */
        public Builder originalMaxPositions(int originalMaxPositions) {
            this.originalMaxPositions = originalMaxPositions;
            return this;
        }

        /** {@code low_freq_factor} and {@code high_freq_factor} of {@link Scaling#LLAMA3} (default 1 and 4). */
        public Builder llama3(double lowFreqFactor, double highFreqFactor) {
            this.lowFreqFactor = lowFreqFactor;
            this.highFreqFactor = highFreqFactor;
            return this;
        }

        /** {@code beta_fast} and {@code beta_slow} of {@link Scaling#YARN} (default 32 and 1). */
        public Builder yarnBetas(double betaFast, double betaSlow) {
            this.betaFast = betaFast;
            this.betaSlow = betaSlow;
            return this;
        }

        /** {@code attention_factor} of {@link Scaling#YARN} (default: from the factor). */
        public Builder attentionFactor(Double attentionFactor) {
            this.attentionFactor = attentionFactor;
            return this;
        }

        /** {@code mscale} and {@code mscale_all_dim} of {@link Scaling#YARN} (default: none). */
        public Builder mscale(Double mscale, Double mscaleAllDim) {
            this.mscale = mscale;
            this.mscaleAllDim = mscaleAllDim;
            return this;
        }

        /** {@code truncate} of {@link Scaling#YARN} (default true). */
        public Builder truncate(boolean truncate) {
            this.truncate = truncate;
            return this;
        }

        /** The precision of the inverse frequencies (default {@link FrequencyPrecision#FLOAT64}). */
        public Builder frequencyPrecision(FrequencyPrecision precision) {
            this.frequencyPrecision = precision;
            return this;
        }

        /**
         * The validated embedding.
         *
         * @throws IllegalArgumentException naming the setting that does not fit
         */
        public RotaryEmbedding build() {
            return new RotaryEmbedding(this);
        }
    }
}
