package org.attn4j.distributed.collective;

import java.util.concurrent.CompletableFuture;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Binomial-tree broadcast in {@code ceil(log2 P)} rounds. With {@code r} a member's distance after the root on
 * the ring, member {@code r > 0} receives from {@code r - highestOneBit(r)}, then every member sends to
 * {@code r + m} for each power of two {@code m > highestOneBit(r)} (for the root: every {@code m >= 1}) with
 * {@code r + m < P}. Every member but the root receives the array once: {@code (P - 1)} copies in all.
 *
 * <pre>
 *   P = 6, root r = 0:   0 -> 1,  0 -> 2,  0 -> 4,   1 -> 3,  1 -> 5
 * </pre>
 */
final class BinomialBroadcast {

    private BinomialBroadcast() {
    }

    /** @return {@code array} on the root, the received copy elsewhere */
    static CompletableFuture<INDArray> run(Exchange<?> ex, int root, INDArray array, int phase) {
        Group g = ex.group();
        int p = g.size();
        int r = Math.floorMod(g.index() - root, p);
        CompletableFuture<INDArray> have = r == 0 ? CompletableFuture.completedFuture(array)
                : ex.receive(Math.floorMod(root + r - Integer.highestOneBit(r), p), phase);
        return have.thenApply(a -> {
            for (int m = r == 0 ? 1 : Integer.highestOneBit(r) << 1; m > 0 && r + m < p; m <<= 1) {
                ex.send(Math.floorMod(root + r + m, p), phase, a);
            }
            return a;
        });
    }
}
