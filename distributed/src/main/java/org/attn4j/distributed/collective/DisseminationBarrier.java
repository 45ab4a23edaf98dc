package org.attn4j.distributed.collective;

import java.util.concurrent.CompletableFuture;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Dissemination barrier (Hensgen, Finkel and Manber 1988): in round {@code k = 0, 1, ...} while
 * {@code 2^k < P}, member {@code i} sends an empty array to {@code i + 2^k} and waits for one from
 * {@code i - 2^k}. After {@code ceil(log2 P)} rounds every member has heard, directly or not, from every other,
 * so none leaves before all have arrived. Zero payload bytes.
 *
 * <pre>
 *   P = 3    round 0: 0 -> 1, 1 -> 2, 2 -> 0     round 1: 0 -> 2, 1 -> 0, 2 -> 1
 * </pre>
 */
final class DisseminationBarrier {

    private DisseminationBarrier() {
    }

    static CompletableFuture<Void> run(Exchange<?> ex, int phase) {
        return round(ex, 1, Nd4j.create(DataType.FLOAT, 0), phase);
    }

    private static CompletableFuture<Void> round(Exchange<?> ex, int distance, INDArray empty, int phase) {
        Group g = ex.group();
        int p = g.size();
        if (distance >= p) {
            return CompletableFuture.completedFuture(null);
        }
        ex.send(Math.floorMod(g.index() + distance, p), phase, empty);
        return ex.receive(Math.floorMod(g.index() - distance, p), phase)
                .thenCompose(a -> round(ex, distance * 2, empty, phase));
    }
}
