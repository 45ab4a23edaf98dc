package org.attn4j.distributed.sequence;

import org.attn4j.ops.flash.AttentionMask;

/** Whole-block mask tests shared by the algorithms that visit key blocks one at a time. */
final class BlockMasks {

    private BlockMasks() {
    }

    /**
     * Whether no query at {@code qPos} can see any key at {@code kPos} under {@code mask} (causal and sliding
     * window rules by global position), so the block can be skipped without a kernel call. A false answer only
     * means the block may hold visible pairs.
     */
    static boolean fullyMasked(AttentionMask mask, int[] qPos, int[] kPos) {
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
