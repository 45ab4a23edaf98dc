package org.attn4j.ops.linear;

import java.util.HashMap;
import java.util.Map;

import org.attn4j.ops.flash.AttentionShapes;

/** How one call cuts the sequence into chunks, where each chunk lives, and the decay tables it needs. */
final class ChunkPlan {

    final int chunk;
    final int chunks;
    private final AttentionShapes s;
    private final Map<Long, ChunkTables> tables = new HashMap<>();
    /** Tables are pure functions of (lambda, c) and cost ~1 ms to build for c = 256: kept across calls. */
    private static final Map<String, ChunkTables> BUILT = java.util.Collections.synchronizedMap(
            new java.util.LinkedHashMap<>(16, 0.75f, true) {
                @Override
                protected boolean removeEldestEntry(Map.Entry<String, ChunkTables> eldest) {
                    return size() > 64;
                }
            });

    ChunkPlan(AttentionShapes s, Decay decay, int chunk) {
        this.s = s;
        this.chunk = Math.min(chunk, s.queries());
        this.chunks = (s.queries() + this.chunk - 1) / this.chunk;
        // Built up front: worker threads only read them.
        for (int h = 0; h < s.heads(); h++) {
            double lambda = decay.lambda(h);
            for (int c : new int[] {this.chunk, length(chunks - 1)}) {
                tables.computeIfAbsent(key(h, c), x -> BUILT.computeIfAbsent(Double.doubleToLongBits(lambda) + "/" + c,
                        y -> new ChunkTables(lambda, c)));
            }
        }
    }

    int length(int t) {
        return Math.min(chunk, s.queries() - t * chunk);
    }

    ChunkTables tables(int h, int c) {
        return tables.get(key(h, c));
    }

    long qOffset(int b, int h, int t) {
        return (((long) b * s.heads() + h) * s.queries() + (long) t * chunk) * s.headDim();
    }

    long kOffset(int b, int hk, int t) {
        return (((long) b * s.kvHeads() + hk) * s.keys() + (long) t * chunk) * s.headDim();
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
