package org.attn4j.distributed.collective;

import java.util.concurrent.CompletableFuture;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Ring all-gather: in step {@code s = 0 .. P-2} member {@code i} sends block {@code i - s} (its own first, then
 * the one it received in the previous step) to {@code i + 1} and receives block {@code i - s - 1} from
 * {@code i - 1}. Each member sends {@code P - 1} blocks.
 *
 * <pre>
 *   P = 4     member 0     member 1     member 2     member 3
 *   step 0    b0 -> 1      b1 -> 2      b2 -> 3      b3 -> 0
 *   step 1    b3 -> 1      b0 -> 2      b1 -> 3      b2 -> 0
 *   step 2    b2 -> 1      b3 -> 2      b0 -> 3      b1 -> 0
 * </pre>
 */
final class RingAllGather {

    private RingAllGather() {
    }

    /**
     * @param own this member's block, a tuple of arrays (the same count on every member)
     * @return the blocks of all members by index; this member's is {@code own}, the others are new arrays
     */
    static CompletableFuture<INDArray[][]> run(Exchange<?> ex, INDArray[] own, int phase) {
        int p = ex.group().size();
        INDArray[][] blocks = new INDArray[p][];
        blocks[ex.group().index()] = own;
        return step(ex, blocks, 0, phase).thenApply(v -> blocks);
    }

    private static CompletableFuture<Void> step(Exchange<?> ex, INDArray[][] blocks, int s, int phase) {
        Group g = ex.group();
        int p = g.size();
        if (s == p - 1) {
            return CompletableFuture.completedFuture(null);
        }
        int i = g.index();
        INDArray[] outgoing = blocks[Math.floorMod(i - s, p)];
        ex.sendAll(g.next(), phase, outgoing);
        return ex.receiveAll(g.previous(), phase, outgoing.length).thenCompose(in -> {
            blocks[Math.floorMod(i - s - 1, p)] = in;
            return step(ex, blocks, s + 1, phase);
        });
    }
}
