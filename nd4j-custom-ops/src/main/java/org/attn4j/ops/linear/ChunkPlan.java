package org.attn4j.ops.linear;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionShapes;

/**
 * How one call cuts the sequence into chunks, where each chunk lives, and the decay tables it needs. Chunks hold
 * {@code chunk} positions; with documents they are also cut at every document boundary of every sequence of the
 * batch, so no chunk crosses one: a chunk that starts a document starts from a zero state ({@link #fresh}), and a
 * chunk of padding ({@link #padding}) gives zero output and adds nothing to the state.
 */
final class ChunkPlan {

    final int chunk;
    final int chunks;
    /** Where each chunk starts, plus the end: {@code starts[t] .. starts[t + 1]}. */
    private final int[] starts;
    private final boolean[][] fresh;       // [B][T], null without documents
    private final boolean[][] padding;     // [B][T], null without documents
    private final AttentionShapes s;
    private final Map<Long, ChunkTables> tables = new HashMap<>();
    /** Tables are pure functions of (lambda, c) and cost ~1 ms to build for c = 256: kept across calls. */
    private static final Map<String, ChunkTables> BUILT = Collections.synchronizedMap(
            new LinkedHashMap<>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<String, ChunkTables> eldest) {
                    return size() > 64;
                }
            });

    /**
     * @param docs  documents by global position, or null for none
     * @param first the global position of this call's first position (within {@code docs})
     */
    ChunkPlan(AttentionShapes s, Decay decay, int chunk, Documents docs, int first) {
        this.s = s;
        this.chunk = Math.min(chunk, s.queries());
        int n = s.queries();
        List<Integer> cuts = new ArrayList<>();
        int runStart = 0;
        for (int i = 1; i <= n; i++) {
            boolean boundary = i == n;
            for (int b = 0; docs != null && !boundary && b < s.batch(); b++) {
                boundary = docs.id(b, first + i) != docs.id(b, first + i - 1);
            }
            if (boundary || i - runStart == this.chunk) {
                cuts.add(runStart);
                runStart = i;
            }
        }
        this.chunks = cuts.size();
        this.starts = new int[chunks + 1];
        for (int t = 0; t < chunks; t++) {
            starts[t] = cuts.get(t);
        }
        starts[chunks] = n;
        if (docs == null) {
            fresh = null;
            padding = null;
        } else {
            fresh = new boolean[s.batch()][chunks];
            padding = new boolean[s.batch()][chunks];
            for (int b = 0; b < s.batch(); b++) {
                for (int t = 0; t < chunks; t++) {
                    int p = first + starts[t];
                    padding[b][t] = docs.isPadding(b, p);
                    // The incoming state continues into position 0 of a call that starts the sequence.
                    fresh[b][t] = padding[b][t] || (p > 0 && !docs.continues(b, p));
                }
            }
        }
        // Built up front: worker threads only read them.
        Set<Integer> lengths = new TreeSet<>();
        for (int t = 0; t < chunks; t++) {
            lengths.add(length(t));
        }
        for (int h = 0; h < s.heads(); h++) {
            double lambda = decay.lambda(h);
            for (int c : lengths) {
                tables.computeIfAbsent(key(h, c), x -> BUILT.computeIfAbsent(Double.doubleToLongBits(lambda) + "/" + c,
                        y -> new ChunkTables(lambda, c)));
            }
        }
    }

    int length(int t) {
        return starts[t + 1] - starts[t];
    }

    /** Whether chunk t of sequence b starts from a zero state (a new document, or padding). */
    boolean fresh(int b, int t) {
        return fresh != null && fresh[b][t];
    }

    /** Whether chunk t of sequence b is padding: zero output, nothing added to the state. */
    boolean padding(int b, int t) {
        return padding != null && padding[b][t];
    }

    /** Whether this plan cuts the sequence exactly as {@code other} does. */
    boolean sameChunks(int[] otherStarts) {
        return Arrays.equals(starts, otherStarts);
    }

    int[] starts() {
        return starts.clone();
    }

    ChunkTables tables(int h, int c) {
        return tables.get(key(h, c));
    }

    long qOffset(int b, int h, int t) {
        return (((long) b * s.heads() + h) * s.queries() + starts[t]) * s.headDim();
    }

    long kOffset(int b, int hk, int t) {
        return (((long) b * s.kvHeads() + hk) * s.keys() + starts[t]) * s.headDim();
    }

    /** Where the {@code D x D} state of chunk t of (b, h) starts in a {@code [B, H, T, D, D]} array's buffer. */
    long stateOffset(int b, int h, int t) {
        long d = s.headDim();
        return ((((long) b * s.heads() + h) * chunks) + t) * d * d;
    }

    private static long key(int h, int c) {
        return ((long) h << 32) | c;
    }
}
