package org.attn4j.ops.flash;

import java.util.Arrays;
import java.util.Objects;

import org.attn4j.ops.Documents;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Which keys each query may see, defined by <b>global token positions</b> (DESIGN.md, "Masks").
 *
 * <p>A query at global position {@code i} sees a key at global position {@code j} iff every rule below
 * allows the pair:
 * <ul>
 *   <li>causal: {@code j <= i};</li>
 *   <li>sliding window of width {@code W > 0}: causal {@code i - j < W}; non-causal {@code |i - j| < W};</li>
 *   <li>key padding: the key is a real token of its sequence (padding value non-zero);</li>
 *   <li>documents ({@link Documents}, packed sequences): query and key belong to the same document of their
 *       sequence, neither is padding.</li>
 * </ul>
 * Positions default to {@code 0..N-1}. A sharded layout (contiguous, zigzag, striped, cyclic) only
 * passes other positions, so one kernel serves all of them. Positions are shared by every sequence of
 * a batch; padding and documents are per sequence.
 *
 * <p>Immutable. Built with {@link #builder()}, or {@link #none()} / {@link #causal()}.
 */
public final class AttentionMask {

    private static final AttentionMask NONE = new Builder().build();
    private static final AttentionMask CAUSAL = new Builder().causal(true).build();

    private final boolean causal;
    private final int window;
    private final INDArray keyPadding;
    private final int[] queryPositions;
    private final int[] keyPositions;
    private final Documents documents;

    private AttentionMask(Builder b) {
        this.causal = b.causal;
        this.window = b.window;
        this.keyPadding = b.keyPadding;
        this.queryPositions = b.queryPositions;
        this.keyPositions = b.keyPositions;
        this.documents = b.documents;
    }

    /** Full attention: every query sees every key. */
    public static AttentionMask none() {
        return NONE;
    }

    /** Causal attention over positions {@code 0..N-1}. */
    public static AttentionMask causal() {
        return CAUSAL;
    }

    /** A builder starting from full attention. */
    public static Builder builder() {
        return new Builder();
    }

    /** A builder holding this mask's settings, to derive a variant. */
    public Builder toBuilder() {
        return new Builder().causal(causal).window(window).keyPadding(keyPadding)
                .queryPositions(queryPositions).keyPositions(keyPositions).documents(documents);
    }

    /** Whether a query sees only keys at its own or earlier positions. */
    public boolean isCausal() {
        return causal;
    }

    /** Sliding-window width, or 0 for no window. */
    public int window() {
        return window;
    }

    /** Key padding {@code [B, Nk]} (non-zero = real token), or {@code null} for none. */
    public INDArray keyPadding() {
        return keyPadding;
    }

    /** The document of every global position of every sequence, or {@code null} for one document each. */
    public Documents documents() {
        return documents;
    }

    /** This mask with other documents ({@code null} = none): the per-batch part of a fixed mask. */
    public AttentionMask withDocuments(Documents documents) {
        return documents == this.documents ? this : toBuilder().documents(documents).build();
    }

    /** Global positions of the queries, or {@code null} for {@code 0..Nq-1}. A defensive copy. */
    public int[] queryPositions() {
        return queryPositions == null ? null : queryPositions.clone();
    }

    /** Global positions of the keys, or {@code null} for {@code 0..Nk-1}. A defensive copy. */
    public int[] keyPositions() {
        return keyPositions == null ? null : keyPositions.clone();
    }

    /** Whether the pair (query at global position {@code i}, key at {@code j}) passes the positional rules. */
    public boolean allows(int i, int j) {
        if (causal && j > i) {
            return false;
        }
        if (window > 0) {
            long d = (long) i - j;
            return causal ? d < window : Math.abs(d) < window;
        }
        return true;
    }

    /** Whether any rule can hide a key from a query. */
    public boolean masksAnything() {
        return causal || window > 0 || keyPadding != null || documents != null;
    }

    int[] queryPositionsOrDefault(int n) {
        return queryPositions != null ? queryPositions : iota(n);
    }

    int[] keyPositionsOrDefault(int n) {
        return keyPositions != null ? keyPositions : iota(n);
    }

    static int[] iota(int n) {
        int[] p = new int[n];
        for (int i = 0; i < n; i++) {
            p[i] = i;
        }
        return p;
    }

    @Override
    public String toString() {
        return "AttentionMask{causal=" + causal + ", window=" + window
                + ", keyPadding=" + (keyPadding == null ? "none" : Arrays.toString(keyPadding.shape()))
                + ", queryPositions=" + (queryPositions == null ? "default" : queryPositions.length)
                + ", keyPositions=" + (keyPositions == null ? "default" : keyPositions.length)
                + ", documents=" + (documents == null ? "none" : documents) + "}";
    }

    /** Builder for {@link AttentionMask}; validation of lengths happens when the mask meets its tensors. */
    public static final class Builder {
        private boolean causal;
        private int window;
        private INDArray keyPadding;
        private int[] queryPositions;
        private int[] keyPositions;
        private Documents documents;

        private Builder() {
        }

        /** Causal masking by global position. */
        public Builder causal(boolean causal) {
            this.causal = causal;
            return this;
        }

        /** Sliding window width {@code W >= 0} (0 = no window). */
        public Builder window(int window) {
            if (window < 0) {
                throw new IllegalArgumentException("AttentionMask: window must be >= 0 (0 = none), got " + window);
            }
            this.window = window;
            return this;
        }

        /** Key padding {@code [B, Nk]}: non-zero marks a real token, zero a padded one; {@code null} = none. */
        public Builder keyPadding(INDArray keyPadding) {
            if (keyPadding != null && keyPadding.rank() != 2) {
                throw new IllegalArgumentException("AttentionMask: key padding must have shape [B, Nk], got "
                        + Arrays.toString(keyPadding.shape()));
            }
            this.keyPadding = keyPadding;
            return this;
        }

        /** Global positions of the local queries; {@code null} = {@code 0..Nq-1}. */
        public Builder queryPositions(int[] positions) {
            this.queryPositions = positions == null ? null : positions.clone();
            return this;
        }

        /** Global positions of the local keys; {@code null} = {@code 0..Nk-1}. */
        public Builder keyPositions(int[] positions) {
            this.keyPositions = positions == null ? null : positions.clone();
            return this;
        }

        /** The document of every global position of every sequence ({@code null} = one document each). */
        public Builder documents(Documents documents) {
            this.documents = documents;
            return this;
        }

        /** The immutable mask. */
        public AttentionMask build() {
            return new AttentionMask(this);
        }
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof AttentionMask)) {
            return false;
        }
        AttentionMask m = (AttentionMask) o;
        return causal == m.causal && window == m.window && Objects.equals(keyPadding, m.keyPadding)
                && Arrays.equals(queryPositions, m.queryPositions) && Arrays.equals(keyPositions, m.keyPositions)
                && Objects.equals(documents, m.documents);
    }

    @Override
    public int hashCode() {
        return Objects.hash(causal, window, Arrays.hashCode(queryPositions), Arrays.hashCode(keyPositions));
    }
}
