package org.attn4j.distributed.collective;

import java.util.List;
import java.util.concurrent.CompletableFuture;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Ring reduce-scatter: in step {@code s = 0 .. P-2} member {@code i} sends its partial of block {@code i - s - 1}
 * to {@code i + 1}, receives the partial of block {@code i - s - 2} from {@code i - 1} and combines its own
 * contribution into it. After the last step member {@code i} holds block {@code i} reduced over all members.
 * Each member sends {@code P - 1} blocks.
 *
 * <pre>
 *   P = 4     member 0     member 1     member 2     member 3    partials carry
 *   step 0    b3 -> 1      b0 -> 2      b1 -> 3      b2 -> 0     1 contribution
 *   step 1    b2 -> 1      b3 -> 2      b0 -> 3      b1 -> 0     2 contributions
 *   step 2    b1 -> 1      b2 -> 2      b3 -> 3      b0 -> 0     3, and the receiver adds the 4th
 * </pre>
 */
final class RingReduceScatter {

    private RingReduceScatter() {
    }

    /**
     * @param blocks this member's contribution to each member's block, by index; read only
     * @return this member's reduced block, new arrays
     */
    static CompletableFuture<INDArray[]> run(Exchange<?> ex, Reduction reduction, List<INDArray[]> blocks,
                                             int phase) {
        Group g = ex.group();
        if (g.size() == 1) {
            INDArray[] own = blocks.get(0);
            INDArray[] copy = new INDArray[own.length];
            for (int k = 0; k < own.length; k++) {
                copy[k] = own[k].dup();
            }
            return CompletableFuture.completedFuture(copy);
        }
        return step(ex, reduction, blocks, 0, blocks.get(Math.floorMod(g.index() - 1, g.size())), phase);
    }

    private static CompletableFuture<INDArray[]> step(Exchange<?> ex, Reduction reduction, List<INDArray[]> blocks,
                                                      int s, INDArray[] outgoing, int phase) {
        Group g = ex.group();
        int p = g.size();
        int i = g.index();
        CompletableFuture<Void> sent = ex.sendAll(g.next(), phase, outgoing);
        if (s > 0) {
            // A partial this member made (not the caller's input): free its off-heap memory once it is on the wire.
            sent.whenComplete((v, e) -> release(outgoing, blocks));
        }
        INDArray[] local = blocks.get(Math.floorMod(i - s - 2, p));
        return ex.receiveAll(g.previous(), phase, outgoing.length).thenCompose(in -> {
            INDArray[] partial = reduction.combine(in, local);
            return s == p - 2 ? CompletableFuture.completedFuture(partial)
                    : step(ex, reduction, blocks, s + 1, partial, phase);
        });
    }

    /** Closes the arrays of a partial unless a reduction returned one of the caller's own arrays. */
    private static void release(INDArray[] partial, List<INDArray[]> blocks) {
        for (INDArray a : partial) {
            boolean callers = false;
            for (INDArray[] b : blocks) {
                for (INDArray c : b) {
                    callers |= c == a;
                }
            }
            if (!callers && !a.wasClosed()) {
                a.close();
            }
        }
    }
}
