package org.attn4j.ops.samediff;

import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;

import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.nd4j.autodiff.functions.DifferentialFunction;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.samediff.internal.SameDiffOp;

/**
 * attn4j attention as SameDiff functions: {@link #flash flash attention} (masks, GQA, scale), {@link #linear linear
 * attention} (decay, fixed or learned, and state) and {@link #sequenceParallel one worker's sequence-parallel
 * attention} (ring, WallFacer, ATTENTION2D, LASP, Ulysses). Each returns ordinary {@link SDVariable}s; gradients are
 * exact (the ops' own backward passes, not SameDiff's autodiff through an {@code N x N} softmax) and neither pass
 * builds an {@code N x N} array.
 *
 * <pre>{@code
 * SDVariable o = SDAttention.flash(q, k, v).causal(true).build("attn");          // [B, H, N, D]
 * SDVariable y = SDAttention.linear(q, k, v).causal(true).decay(Decay.of(0.99)).build("lin");
 * SDVariable s = SDAttention.sequenceParallel(q, k, v, ringAttention).build("ring");
 * }</pre>
 *
 * <p>Layout {@code [B, H, N, D]} as for the ops; k and v may have fewer heads than q (GQA). Save with
 * {@code sd.save(file, true)}; load with {@link #load}, which registers the op names first (see
 * {@link JavaBackedOp} for why SameDiff needs them) and restores every setting; a sequence-parallel graph also
 * needs {@link #bind} to attach its algorithm, which holds a transport and is not saved.
 */
public final class SDAttention {

    static {
        registerOps();
    }

    private SDAttention() {
    }

    /** Makes the attn4j op names known to SameDiff; call before {@code SameDiff.load} if not using {@link #load}. */
    public static void registerOps() {
        JavaBackedOp.register(new FlashAttentionOp());
        JavaBackedOp.register(new FlashAttentionGradOp());
        JavaBackedOp.register(new LinearAttentionOp());
        JavaBackedOp.register(new LinearAttentionGradOp());
        JavaBackedOp.register(new SequenceParallelOp());
        JavaBackedOp.register(new SequenceParallelGradOp());
        JavaBackedOp.register(new RotaryOp());
    }

    /**
     * {@code SameDiff.load} of a graph that may hold attn4j functions.
     *
     * @param loadUpdaterState whether to restore the updater state saved with the graph
     */
    public static SameDiff load(File file, boolean loadUpdaterState) throws IOException {
        registerOps();
        return SameDiff.load(file, loadUpdaterState);
    }

    /**
     * Attaches {@code algorithm} to every sequence-parallel function of {@code sd} (all of them, in this process),
     * for a graph loaded from a file or to use another transport.
     *
     * @return how many functions were bound
     */
    public static int bind(SameDiff sd, SequenceParallelAttention<?> algorithm) {
        Objects.requireNonNull(algorithm, "algorithm");
        int n = 0;
        for (SameDiffOp op : sd.getOps().values()) {
            DifferentialFunction f = op.getOp();
            if (f instanceof SequenceParallelOp sp) {
                SequenceParallelOp.bind(sp.key(), algorithm);
                n++;
            }
        }
        return n;
    }

    /** A flash attention function of {@code q [B, H, Nq, D]}, {@code k, v [B, Hkv, Nk, D]}. */
    public static Flash flash(SDVariable q, SDVariable k, SDVariable v) {
        return new Flash(q, k, v);
    }

    /** A linear attention function of {@code q [B, H, N, D]}, {@code k, v [B, Hkv, N, D]}. */
    public static Linear linear(SDVariable q, SDVariable k, SDVariable v) {
        return new Linear(q, k, v);
    }

    /**
     * One worker's part of a sequence-parallel attention: {@code q, k, v} are this worker's shards, the result its
     * rows of O. Every worker of the algorithm's group builds the same graph and runs it in step.
     */
    public static SequenceParallel sequenceParallel(SDVariable q, SDVariable k, SDVariable v,
                                                    SequenceParallelAttention<?> algorithm) {
        return new SequenceParallel(q, k, v, algorithm);
    }

    /**
     * Rotary position embedding ({@link RotaryEmbedding}) of {@code x [B, H, N, D]}: q or k rotated at positions
     * 0 to N-1, or at the global positions {@link Rotary#positions} gives (a shard's, or restarting per document).
     * The attention functions apply it to q and k themselves with their {@code rope(...)} setting.
     */
    public static Rotary rope(SDVariable x, RotaryEmbedding rope) {
        return new Rotary(x, rope);
    }

    /** Settings of a rotary embedding; {@link #build} adds it to the graph. */
    public static final class Rotary {
        private final SDVariable x;
        private final RotaryEmbedding rope;
        private SDVariable positions;
        private int length;

        private Rotary(SDVariable x, RotaryEmbedding rope) {
            this.x = Objects.requireNonNull(x, "x");
            this.rope = Objects.requireNonNull(rope, "rope");
        }

        /**
         * Global positions, integers {@code [N]} shared by the batch or {@code [B, N]} (not differentiated);
         * default 0 to N-1.
         */
        public Rotary positions(SDVariable positions) {
            this.positions = positions;
            return this;
        }

        /**
         * The global sequence length dynamic (NTK) scaling grows theta from, for a shard whose positions stop short
         * of it; default the largest position + 1.
         */
        public Rotary sequenceLength(int length) {
            if (length < 0) {
                throw new IllegalArgumentException("SDAttention.rope: sequence length must be >= 0 (0 = the largest "
                        + "position + 1), got " + length);
            }
            this.length = length;
            return this;
        }

        /** Adds the rotation; returns x rotated, named {@code name}. */
        public SDVariable build(String name) {
            SDVariable[] in = positions == null ? new SDVariable[] {x} : new SDVariable[] {x, positions};
            SDVariable out = new RotaryOp(x.getSameDiff(), in, rope, 1, length).outputVariable();
            return name == null ? out : out.rename(name);
        }
    }

    /** q and k rotated by {@code rope} (null: unchanged), at {@code positions} (null: 0 to N-1). */
    private static SDVariable[] rotated(SDVariable q, SDVariable k, RotaryEmbedding rope, SDVariable positions,
                                        int length) {
        if (rope == null) {
            return new SDVariable[] {q, k};
        }
        return new SDVariable[] {rope(q, rope).positions(positions).sequenceLength(length).build(null),
            rope(k, rope).positions(positions).sequenceLength(length).build(null)};
    }

    /** Settings of a flash attention function; {@link #build} adds it to the graph. */
    public static final class Flash {
        private final SDVariable q;
        private final SDVariable k;
        private final SDVariable v;
        private boolean causal;
        private int window;
        private SDVariable keyPadding;
        private SDVariable documents;
        private double scale;
        private RotaryEmbedding rope;
        private SDVariable ropePositions;
        private int ropeLength;

        private Flash(SDVariable q, SDVariable k, SDVariable v) {
            this.q = requireSameGraph("flash", q, k, v);
            this.k = k;
            this.v = v;
        }

        /** Query i sees only keys j <= i. */
        public Flash causal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /** Sliding window of width {@code window} (0 = none): causal {@code i - j < W}, else {@code |i - j| < W}. */
        public Flash window(int window) {
            if (window < 0) {
                throw new IllegalArgumentException("SDAttention.flash: window must be >= 0 (0 = none), got " + window);
            }
            this.window = window;
            return this;
        }

        /** Key padding {@code [B, Nk]}: non-zero marks a real key, zero a padded one (not differentiated). */
        public Flash keyPadding(SDVariable keyPadding) {
            this.keyPadding = keyPadding;
            return this;
        }

        /**
         * Document ids {@code [B, N]} (int32 or int64; negative = padding) of packed sequences: a query sees only
         * keys of its own document. Each document must be one run of positions.
         */
        public Flash documents(SDVariable documents) {
            this.documents = documents;
            return this;
        }

        /** Score scale; default {@code 1/sqrt(D)}. */
        public Flash scale(double scale) {
            this.scale = checkScale("flash", scale);
            return this;
        }

        /** Rotary position embedding of q and k at positions 0 to N-1 (self-attention: Nq = Nk). */
        public Flash rope(RotaryEmbedding rope) {
            return rope(rope, null, 0);
        }

        /**
         * Rotary position embedding of q and k at global {@code positions} ({@link Rotary#positions}; null: 0 to
         * N-1), with {@code sequenceLength} for dynamic scaling ({@link Rotary#sequenceLength}; 0: the largest
         * position + 1).
         */
        public Flash rope(RotaryEmbedding rope, SDVariable positions, int sequenceLength) {
            this.rope = Objects.requireNonNull(rope, "rope");
            this.ropePositions = positions;
            this.ropeLength = sequenceLength;
            return this;
        }

        /** Adds the function; returns O {@code [B, H, Nq, D]} named {@code name}. */
        public SDVariable build(String name) {
            return buildWithLse(name)[0];
        }

        /** Adds the function; returns O and the softmax log-sum-exp {@code [B, H, Nq]} ({@code name + "_lse"}). */
        public SDVariable[] buildWithLse(String name) {
            SDVariable[] qk = rotated(q, k, rope, ropePositions, ropeLength);
            SDVariable q = qk[0];
            SDVariable k = qk[1];
            List<SDVariable> in = new ArrayList<>(List.of(q, k, v));
            int optional = 0;
            if (keyPadding != null) {
                in.add(keyPadding);
                optional |= FlashAttentionOp.PADDING;
            }
            if (documents != null) {
                in.add(documents);
                optional |= FlashAttentionOp.DOCUMENTS;
            }
            SDVariable[] out = new FlashAttentionOp(q.getSameDiff(), in.toArray(new SDVariable[0]), causal, window,
                    optional, scale).outputVariables();
            return named(name, out, "_lse");
        }
    }

    /** Settings of a linear attention function; {@link #build} adds it to the graph. */
    public static final class Linear {
        private final SDVariable q;
        private final SDVariable k;
        private final SDVariable v;
        private boolean causal;
        private Decay fixedDecay = Decay.none();
        private SDVariable decay;
        private SDVariable kvIn;
        private SDVariable documents;

        private Linear(SDVariable q, SDVariable k, SDVariable v) {
            this.q = requireSameGraph("linear", q, k, v);
            this.k = k;
            this.v = v;
        }

        /** Position s sees only positions {@code <= s} (needed for any decay). */
        public Linear causal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /** A fixed decay {@code lambda} (one value, or one per query head); default none ({@code lambda = 1}). */
        public Linear decay(Decay decay) {
            this.fixedDecay = Objects.requireNonNull(decay, "decay");
            this.decay = null;
            return this;
        }

        /**
         * A decay taken from the graph, {@code [H]} or {@code [1]} with values in {@code (0, 1]}, and differentiated:
         * e.g. {@code sd.nn.sigmoid(theta)} for a learned decay.
         */
        public Linear decay(SDVariable lambda) {
            this.decay = Objects.requireNonNull(lambda, "lambda");
            return this;
        }

        /** The state entering the sequence, {@code [B, H, D, D]} (from an earlier segment's final state). */
        public Linear kvIn(SDVariable kvIn) {
            this.kvIn = kvIn;
            return this;
        }

        /**
         * Document ids {@code [B, N]} (int32 or int64; negative = padding) of packed sequences: the state restarts at
         * every document. Each document must be one run of positions.
         */
        public Linear documents(SDVariable documents) {
            this.documents = documents;
            return this;
        }

        /** Adds the function; returns O {@code [B, H, N, D]} named {@code name}. */
        public SDVariable build(String name) {
            return buildWithState(name)[0];
        }

        /** Adds the function; returns O and the final state {@code [B, H, D, D]} ({@code name + "_kv"}). */
        public SDVariable[] buildWithState(String name) {
            if (!causal && (decay != null || !fixedDecay.isNone())) {
                throw new IllegalArgumentException("SDAttention.linear: a decay needs causal attention; the "
                        + "non-causal form O = Q (K^T V) has no order to decay along");
            }
            List<SDVariable> in = new ArrayList<>(List.of(q, k, v));
            if (kvIn != null) {
                in.add(kvIn);
            }
            if (decay != null) {
                in.add(decay);
            }
            if (documents != null) {
                in.add(documents);
            }
            double[] fixed = decay == null && !fixedDecay.isNone() ? fixedDecay.values() : new double[0];
            SDVariable[] out = new LinearAttentionOp(q.getSameDiff(), in.toArray(new SDVariable[0]), causal,
                    kvIn != null, decay != null, documents != null, fixed).outputVariables();
            return named(name, out, "_kv");
        }
    }

    /** Settings of a sequence-parallel attention function; {@link #build} adds it to the graph. */
    public static final class SequenceParallel {
        private final SDVariable q;
        private final SDVariable k;
        private final SDVariable v;
        private final SequenceParallelAttention<?> algorithm;
        private double scale;
        private RotaryEmbedding rope;
        private SDVariable ropePositions;
        private int ropeLength;

        private SequenceParallel(SDVariable q, SDVariable k, SDVariable v, SequenceParallelAttention<?> algorithm) {
            this.q = requireSameGraph("sequenceParallel", q, k, v);
            this.k = k;
            this.v = v;
            this.algorithm = Objects.requireNonNull(algorithm, "algorithm");
        }

        /** Score scale; default {@code 1/sqrt(D)} for softmax attention and 1 for linear attention (LASP). */
        public SequenceParallel scale(double scale) {
            this.scale = checkScale("sequenceParallel", scale);
            return this;
        }

        /**
         * Rotary position embedding of this worker's q and k at their global {@code positions} (integers
         * {@code [n]}: the positions of this worker's rows in the whole sequence, by the algorithm's layout), with
         * the whole sequence's length for dynamic scaling.
         */
        public SequenceParallel rope(RotaryEmbedding rope, SDVariable positions, int sequenceLength) {
            this.rope = Objects.requireNonNull(rope, "rope");
            this.ropePositions = Objects.requireNonNull(positions, "positions");
            if (sequenceLength < 1) {
                throw new IllegalArgumentException("SDAttention.sequenceParallel: rope needs the whole sequence's "
                        + "length, got " + sequenceLength);
            }
            this.ropeLength = sequenceLength;
            return this;
        }

        /** Adds the function; returns this worker's rows of O named {@code name}. */
        public SDVariable build(String name) {
            String key = "attn4j-sp-" + UUID.randomUUID();
            SequenceParallelOp.bind(key, algorithm);
            SDVariable[] qk = rotated(q, k, rope, ropePositions, ropeLength);
            SDVariable out = new SequenceParallelOp(q.getSameDiff(), new SDVariable[] {qk[0], qk[1], v}, key, scale)
                    .outputVariable();
            return name == null ? out : out.rename(name);
        }
    }

    private static double checkScale(String fn, double scale) {
        if (!(scale > 0) || Double.isInfinite(scale)) {
            throw new IllegalArgumentException("SDAttention." + fn + ": scale must be finite and > 0, got " + scale);
        }
        return scale;
    }

    private static SDVariable requireSameGraph(String fn, SDVariable q, SDVariable k, SDVariable v) {
        Objects.requireNonNull(q, "q");
        Objects.requireNonNull(k, "k");
        Objects.requireNonNull(v, "v");
        if (k.getSameDiff() != q.getSameDiff() || v.getSameDiff() != q.getSameDiff()) {
            throw new IllegalArgumentException("SDAttention." + fn + ": q, k and v must belong to the same SameDiff "
                    + "graph");
        }
        return q;
    }

    private static SDVariable[] named(String name, SDVariable[] out, String secondSuffix) {
        if (name != null) {
            out[0] = out[0].rename(name);
            out[1] = out[1].rename(name + secondSuffix);
        }
        return out;
    }
}
