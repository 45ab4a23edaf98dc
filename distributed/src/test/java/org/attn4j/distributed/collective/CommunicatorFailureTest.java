package org.attn4j.distributed.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.PeerFailedException;
import org.attn4j.distributed.transport.PeerTimeoutException;
import org.attn4j.distributed.transport.Transport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Misuse and failures: clear messages, no hang. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class CommunicatorFailureTest {

    private Ranks ranks;

    @AfterEach
    void closeTransports() {
        if (ranks != null) {
            ranks.close();
        }
    }

    private Transport[] transports(int worldSize, Duration timeout) {
        ranks = Ranks.inJvm(worldSize, timeout);
        return ranks.transports().toArray(new Transport[0]);
    }

    @Test
    void failsWithinTimeoutNamingThePeerWhenAMemberNeverCalls() {
        Transport[] t = transports(3, Duration.ofMillis(300));
        Communicator c = Communicator.world(t[0]);
        CollectiveException e = assertThrows(CollectiveException.class,
                () -> c.allGather(Nd4j.ones(DataType.FLOAT, 2)));
        assertInstanceOf(PeerTimeoutException.class, e.getCause());
        assertTrue(e.getMessage().contains("allGather call 0") && e.getMessage().contains("rank 2"),
                e.getMessage());
        IllegalStateException again = assertThrows(IllegalStateException.class, c::barrier);
        assertTrue(again.getMessage().contains("has failed"), again.getMessage());
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS)
    void everyMemberNamesTheKilledRankLongBeforeItsOwnTimeout() throws Exception {
        // Ring of 4, rank 2 dies in the middle of an all-gather. Only rank 3 waits on rank 2; ranks 0 and 1 wait on
        // live neighbours and hear of it from rank 3's notice (their transports would wait 60 s).
        Transport[] t = transports(4, Duration.ofSeconds(60));
        // Rank 2 dies only once every rank has left the barrier. Its own barrier can return while another rank's
        // has received everything but not yet completed (the last step runs on the communicator's executor); a
        // notice of the death arriving then fails that rank's barrier call, not the all-gather this test is about.
        CountDownLatch leftBarrier = new CountDownLatch(t.length);
        java.util.List<Throwable> failures = ranks.run(Duration.ofSeconds(30), tr -> {
            Communicator c = Communicator.world(tr);
            c.barrier();
            leftBarrier.countDown();
            if (tr.rank() == 2) {
                awaitOrFail(leftBarrier, "every rank to leave the barrier");
                ((InJvmTransport) tr).kill();
                return null;
            }
            CollectiveException e = assertThrows(CollectiveException.class,
                    () -> c.allGather(Nd4j.ones(DataType.DOUBLE, 1000)));
            return e;
        });
        for (int r : new int[] {0, 1, 3}) {
            Throwable e = failures.get(r);
            PeerFailedException cause = assertInstanceOf(PeerFailedException.class, e.getCause(), e.toString());
            assertEquals(2, cause.peer(), "rank " + r + ": " + e.getMessage());
            assertTrue(e.getMessage().contains("allGather call 1") && e.getMessage().contains("rank 2"),
                    e.getMessage());
        }
    }

    private static void awaitOrFail(CountDownLatch latch, String what) {
        try {
            assertTrue(latch.await(10, TimeUnit.SECONDS), "timed out waiting for " + what);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted waiting for " + what, e);
        }
    }

    @Test
    void aRankThatNoticesFailsItsOtherCommunicatorsToo() {
        // Rank 0 waits on live rank 1 in one communicator when its call in another finds rank 2 dead. No notice
        // comes back to rank 0 (rank 1 would give up on hearing rank 0's), so rank 0 must fail that wait itself,
        // naming rank 2, not after its own 20 s timeout naming rank 1. As in ATTENTION2D-O's row and column rings.
        Transport[] t = transports(3, Duration.ofSeconds(20));
        Communicator withLive = Communicator.of(t[0], Group.of(t[0], 0, 1), 1);
        Communicator withDead = Communicator.of(t[0], Group.of(t[0], 0, 2), 2);
        CollectiveHandle<INDArray> waiting = withLive.sendRecvAsync(Communicator.NONE, null, 1);
        ((InJvmTransport) t[2]).kill();
        long start = System.nanoTime();
        CollectiveException direct = assertThrows(CollectiveException.class, withDead::barrier);
        assertEquals(2, assertInstanceOf(PeerFailedException.class, direct.getCause()).peer());
        CollectiveException e = assertThrows(CollectiveException.class, waiting::join);
        long tookMs = (System.nanoTime() - start) / 1_000_000;
        assertEquals(2, assertInstanceOf(PeerFailedException.class, e.getCause()).peer(), e.getMessage());
        assertTrue(e.getMessage().contains("sendRecv call 0") && e.getMessage().contains("rank 2"), e.getMessage());
        assertTrue(tookMs < 5000, "the wait on rank 1 failed after " + tookMs + " ms, expected well under the "
                + "20000 ms transport timeout");
        // The communicator that noticed refuses further calls as after any failed call; the other fails them
        // naming rank 2, as after a notice.
        assertThrows(IllegalStateException.class, withDead::barrier);
        CollectiveException later = assertThrows(CollectiveException.class, withLive::barrier);
        assertEquals(2, assertInstanceOf(PeerFailedException.class, later.getCause()).peer(), later.getMessage());
    }

    @Test
    void aCallMadeAfterAFailureNoticeFailsNamingTheDeadRank() {
        // The notice can arrive before a member starts its next call (the race the test above may meet).
        Transport[] t = transports(3, Duration.ofSeconds(5));
        Communicator c = Communicator.world(t[0]);
        c.failedElsewhere(new PeerFailedException(0, 2, -1, "rank 1 reported that rank 2 failed"));
        CollectiveException e = assertThrows(CollectiveException.class, c::barrier);
        assertEquals(2, assertInstanceOf(PeerFailedException.class, e.getCause()).peer());
        assertTrue(e.getMessage().contains("rank 2 failed") && e.getMessage().contains("barrier call 0"),
                e.getMessage());
    }

    @Test
    void aRankReportedCutOffFromItsDriverIsUnreachableNotFailed() {
        // Rank 2 is alive: it lost the media driver its host's ranks share. A rank elsewhere hearing so must not
        // call it failed; a rank of its own host has lost the same driver, and says so of itself.
        String elsewhere = new PeerFailedException(0, 2, -1, "rank 2 reported that rank 2 lost its media driver")
                .getMessage();
        assertTrue(elsewhere.startsWith("rank 0: peer rank 2 unreachable:"), elsewhere);
        PeerFailedException here = new PeerFailedException(3, 2, -1, PeerFailedException.driverLostReason(3));
        assertTrue(here.driverLost() && here.getMessage().equals("rank 3: peer rank 2 unreachable: rank 3 lost its "
                + "media driver"), here.getMessage());
        String failed = new PeerFailedException(0, 12, -1, "rank 1 reported that rank 2 lost its media driver")
                .getMessage();
        assertTrue(failed.contains("peer rank 12 failed"), failed);
    }

    @Test
    void refusesBlocksThatDoNotMatchTheGroup() {
        Transport[] t = transports(2, Duration.ofSeconds(1));
        Communicator c = Communicator.world(t[0]);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> c.reduceScatter(Nd4j.ones(DataType.FLOAT, 3, 2)));
        assertTrue(e.getMessage().contains("[3, 2]") && e.getMessage().contains("2 equal blocks"), e.getMessage());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
                () -> c.sendRecv(2, Nd4j.ones(DataType.FLOAT, 1), 0));
        assertTrue(bad.getMessage().contains("got 2"), bad.getMessage());
    }

    @Test
    void refusesAGroupBuiltForAnotherRank() {
        Transport[] t = transports(4, Duration.ofSeconds(1));
        Group forRank1 = Group.of(t[1], 0, 1);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Communicator.of(t[0], forRank1, 0));
        assertTrue(e.getMessage().contains("rank 0"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Communicator.of(t[0], Group.world(t[0]),
                CollectiveTags.CHANNELS));
    }
}
