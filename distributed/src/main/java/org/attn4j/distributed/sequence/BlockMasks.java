package org.attn4j.distributed.sequence;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;

/** Whole-block mask tests shared by the algorithms that visit key blocks one at a time. */
final class BlockMasks {

    private BlockMasks() {
    }

    /**
     * Whether no query at {@code qPos} can see any key at {@code kPos} under {@code mask} (causal and sliding
     * window rules by global position; documents: in no sequence of the batch does a query share a document with a
     * key it may see by the causal rule), so the block can be skipped without a kernel call. A false answer only
     * means the block may hold visible pairs.
     */
    static boolean fullyMasked(AttentionMask mask, int[] qPos, int[] kPos) {
        return positionallyMasked(mask, qPos, kPos) || (mask.documents() != null
                && noSharedDocument(mask.documents(), mask.isCausal(), qPos, kPos));
    }

    /**
     * Whether no query shares a document with a key (that it may see by the causal rule) in any sequence: per
     * sequence, the least key position of every document, then one look-up per query.
     */
    static boolean noSharedDocument(Documents docs, boolean causal, int[] qPos, int[] kPos) {
        int[] least = new int[docs.length()];
        for (int b = 0; b < docs.batch(); b++) {
            java.util.Arrays.fill(least, Integer.MAX_VALUE);
            for (int j : kPos) {
                if (!docs.isPadding(b, j)) {
                    int s = docs.start(b, j);
                    least[s] = Math.min(least[s], j);
                }
            }
            for (int i : qPos) {
                if (!docs.isPadding(b, i) && least[docs.start(b, i)] <= (causal ? i : Integer.MAX_VALUE - 1)) {
                    return false;
                }
            }
        }
        return true;
    }

    /**
     * {@code documents}, checked to cover the algorithm's global sequence length (the batch size is checked with
     * the shards); null stays null.
     *
     * @throws IllegalArgumentException naming the algorithm, the expected and the actual length
     */
    static Documents checkDocuments(String op, Documents documents, int length) {
        if (documents != null && documents.length() != length) {
            throw new IllegalArgumentException(op + ": document ids must cover the N = " + length
                    + " global positions, got [" + documents.batch() + ", " + documents.length() + "]");
        }
        return documents;
    }

    private static boolean positionallyMasked(AttentionMask mask, int[] qPos, int[] kPos) {
        int qMin = Integer.MAX_VALUE;
        int qMax = Integer.MIN_VALUE;
        for (int x : qPos) {
            qMin = Math.min(qMin, x);
            qMax = Math.max(qMax, x);
        }
        int kMin = Integer.MAX_VALUE;
        int kMax = Integer.MIN_VALUE;
        for (int x : kPos) {
            kMin = Math.min(kMin, x);
            kMax = Math.max(kMax, x);
        }
        if (mask.isCausal() && kMin > qMax) {
            return true;
        }
        long w = mask.window();
        return w > 0 && ((long) qMin - kMax >= w || (!mask.isCausal() && (long) kMin - qMax >= w));
    }
}
