package org.attn4j.distributed.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * Round times against hand-computed alpha-beta costs on 2 nodes x 2 workers: inside a node 10 GB/s and 1 us,
 * between nodes 1 GB/s per adapter and 10 us; messages of 1 MB (10^6 bytes).
 */
class PlanNetworkTest {

    private static final long MB = 1_000_000;

    private static Network network(int nics) {
        return new Network(new ClusterSpec(2, 2, 10, 1, 1, 10, nics));
    }

    @Test
    void ringStepIsPacedByItsNodeCrossingHops() {
        // 0 -> 1 and 2 -> 3 stay in their node (0.1 ms + 1 us); 1 -> 2 and 3 -> 0 cross, one per node (1 ms + 10 us)
        assertEquals(1.010e-3, network(1).seconds(Round.of(4, MB, r -> (r + 1) % 4)), 1e-12);
    }

    @Test
    void workersOfANodeSendingAcrossShareItsAdapters() {
        Round across = Round.of(4, MB, r -> (r + 2) % 4);          // both workers of each node send to the other
        assertEquals(2.010e-3, network(1).seconds(across), 1e-12);
        assertEquals(1.010e-3, network(2).seconds(across), 1e-12);  // an adapter each
    }

    @Test
    void messagesOfOneWorkerShareItsLink() {
        Round.Flow toNext = Round.Flow.of(4, MB, r -> r ^ 1);      // 0 <-> 1, 2 <-> 3: inside the node
        assertEquals(0.101e-3, network(1).seconds(Round.of(toNext)), 1e-12);
        assertEquals(0.201e-3, network(1).seconds(Round.of(toNext, toNext)), 1e-12);
    }

    @Test
    void roundWithoutMessagesTakesNoTime() {
        assertEquals(0, network(1).seconds(Round.of(4, MB, r -> r)));
        assertEquals(0, network(1).seconds(Round.of(4, MB, r -> Round.NONE)));
    }

    @Test
    void scheduleOverlapsComputeWithItsRoundsAndAddsTheRest() {
        Network net = network(1);
        Round ring = Round.of(4, MB, r -> (r + 1) % 4);            // 1.01 ms
        assertEquals(3 * 2e-3 + 1.01e-3, new Schedule(4).overlapped(3, 2e-3, ring).comm(ring).seconds(net), 1e-12);
        assertEquals(3 * 1.01e-3 + 0.5e-3, new Schedule(4).overlapped(3, 0.5e-3, ring).compute(0.5e-3).seconds(net),
                1e-12);
        Schedule s = new Schedule(4).overlapped(3, 0.5e-3, ring).compute(0.5e-3);
        assertEquals(2e-3, s.computeSeconds(), 1e-15);
        assertEquals(3 * MB, s.bytesSent()[1]);
        assertEquals(3 * MB, s.interNodeBytes(new ClusterSpec(2, 2, 10, 1, 1, 10, 1))[1]);
        assertEquals(0, s.interNodeBytes(new ClusterSpec(2, 2, 10, 1, 1, 10, 1))[0]);
        assertEquals(3, s.messagesSent()[0]);
    }
}
