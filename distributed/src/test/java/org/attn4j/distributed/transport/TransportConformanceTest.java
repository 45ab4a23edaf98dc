package org.attn4j.distributed.transport;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.attn4j.distributed.transport.TestCluster.Kind;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * The contract of {@link Transport}, run against the in-JVM transport and against Aeron (P transports in this
 * JVM over IPC through the job's one driver, and over loopback UDP with a driver each). Tests that need a wire (checksums, tokens) run for
 * Aeron only. Fault tests use short timeouts; every test has a JUnit timeout, so a hang fails instead of
 * blocking the build.
 */
class TransportConformanceTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(10);
    private static final Duration SHORT = Duration.ofMillis(2000);

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void deliversInOrderPerTag(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            int n = 40;
            List<CompletableFuture<Void>> sends = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                sends.add(c.rank(0).send(1, 1, Nd4j.scalar(DataType.FLOAT, i)));
                sends.add(c.rank(0).send(1, 2, Nd4j.scalar(DataType.FLOAT, 1000 + i)));
            }
            // Tag 2 first: messages of another tag that arrived earlier must not get in the way.
            for (int i = 0; i < n; i++) {
                assertEquals(1000 + i, get(c.rank(1).receive(0, 2)).getFloat(0), "tag 2, message " + i);
            }
            for (int i = 0; i < n; i++) {
                assertEquals(i, get(c.rank(1).receive(0, 1)).getFloat(0), "tag 1, message " + i);
            }
            for (CompletableFuture<Void> s : sends) {
                get(s);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(60)
    void carriesLargeTensorIntact(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            INDArray big = pattern(DataType.FLOAT, new long[] {10, 1000, 1000}, 11); // 40 MB
            CompletableFuture<INDArray> received = c.rank(1).receive(0, 3);
            get(c.rank(0).send(1, 3, big));
            assertSameArray(big, get(received));
            assertEquals(40_000_000L, c.rank(0).traffic().toPeerWithTag(1, 3));
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void receivesIntoTheCallersArrayWhetherPostedBeforeOrAfterTheMessageCame(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            INDArray message = pattern(DataType.FLOAT, new long[] {3 << 18}, 21);           // 3 MB: several chunks
            INDArray target = Nd4j.valueArrayOf(new long[] {(3 << 18) + 200}, -7f, DataType.FLOAT);
            INDArray into = target.get(NDArrayIndex.interval(100, 100 + (3 << 18)));
            CompletableFuture<INDArray> posted = c.rank(1).receive(0, 21, into);
            c.rank(0).send(1, 21, message);
            assertSame(into, get(posted), "the receive completes with the caller's array");
            assertSameArray(message, into);
            assertEquals(-7f, target.getFloat(99));                      // nothing written outside it
            assertEquals(-7f, target.getFloat(100 + (3 << 18)));
            if (c.onWire()) {
                assertEquals(1, c.aeron(1).directReceives(), "written straight from the log, no array between");
            }
            // A message that is already there when the receive comes is copied over, reshaped to the target.
            INDArray matrix = pattern(DataType.DOUBLE, new long[] {6, 5}, 22);
            c.rank(0).send(1, 22, matrix);
            c.rank(0).send(1, 23, Nd4j.scalar(1.0));
            get(c.rank(1).receive(0, 23));                              // sent after it: it has arrived
            INDArray flat = Nd4j.create(DataType.DOUBLE, 30);
            assertSame(flat, get(c.rank(1).receive(0, 22, flat)));
            assertSameArray(matrix.reshape(30), flat);
            // A message of another element count fails the receive, naming both; the next one still arrives.
            c.rank(0).send(1, 24, pattern(DataType.FLOAT, new long[] {8}, 24));
            c.rank(0).send(1, 24, pattern(DataType.FLOAT, new long[] {5}, 25));
            Throwable t = failure(c.rank(1).receive(0, 24, Nd4j.create(DataType.FLOAT, 5)));
            assertTrue(t.getMessage().contains("into an array of 5 FLOAT: the message holds 8 FLOAT"),
                    t.getMessage());
            assertSameArray(pattern(DataType.FLOAT, new long[] {5}, 25),
                    get(c.rank(1).receive(0, 24, Nd4j.create(DataType.FLOAT, 5))));
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void aLargeMessageThatComesBeforeItsReceiveIsStillWrittenStraightIntoTheCallersArray(Kind kind)
            throws Exception {
        // A wait far longer than the pause below, so the message is surely still unread when the receive comes.
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT, b -> b.lateReceiveWait(Duration.ofSeconds(8)))) {
            INDArray message = pattern(DataType.FLOAT, new long[] {1 << 18}, 51);              // 1 MB
            CompletableFuture<Void> sent = c.rank(0).send(1, 51, message);
            Thread.sleep(300);                                                  // the message arrives first
            long direct = c.onWire() ? c.aeron(1).directReceives() : 0;
            INDArray into = Nd4j.create(DataType.FLOAT, 1 << 18);
            assertSame(into, get(c.rank(1).receive(0, 51, into)));
            assertSameArray(message, into);
            get(sent);
            if (c.onWire()) {
                assertEquals(direct + 1, c.aeron(1).directReceives(), "left in the log until its receive came, "
                        + "then written straight into the caller's array");
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void largeMessagesNoReceiveWaitsForDoNotHoldUpTheMessagesBehindThem(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            // Three large messages no receive waits for, then a small one that is received first: each large one
            // waits a moment in the log for its receive and is then read into an array of its own.
            INDArray[] large = new INDArray[3];
            for (int k = 0; k < large.length; k++) {
                large[k] = pattern(DataType.FLOAT, new long[] {1 << 18}, 52 + k);
                c.rank(0).send(1, 52 + k, large[k]);
            }
            c.rank(0).send(1, 55, Nd4j.scalar(5f));
            assertEquals(5f, get(c.rank(1).receive(0, 55)).getFloat(0));
            for (int k = large.length - 1; k >= 0; k--) {
                INDArray into = Nd4j.create(DataType.FLOAT, 1 << 18);
                assertSame(into, get(c.rank(1).receive(0, 52 + k, into)));
                assertSameArray(large[k], into);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void receivesTheSumOfTheMessageAndAnAddendWhetherPostedBeforeOrAfterTheMessageCame(Kind kind) throws Exception {
        Executor pool = TransportThreads.completer();
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE}) {
                int tag = type == DataType.FLOAT ? 31 : 32;
                long n = (3 << 18) + 3;                                  // several chunks, an odd element count
                INDArray message = pattern(type, new long[] {n}, tag);
                INDArray addend = pattern(type, new long[] {n}, tag + 100);
                INDArray expected = message.add(addend);
                INDArray target = Nd4j.valueArrayOf(new long[] {n + 200}, -7.0, type);
                INDArray into = target.get(NDArrayIndex.interval(100, 100 + n));
                long direct = c.onWire() ? c.aeron(1).directReceives() : 0;
                CompletableFuture<INDArray> posted = c.rank(1).receiveSum(0, tag, into, addend, pool);
                c.rank(0).send(1, tag, message);
                assertSame(into, get(posted), "the receive completes with the caller's array");
                assertSameArray(expected, into);                          // the same bits as ND4J's add
                assertEquals(-7.0, target.getDouble(99));                 // nothing written outside it
                assertEquals(-7.0, target.getDouble(100 + n));
                if (c.onWire()) {
                    assertEquals(direct + 1, c.aeron(1).directReceives(), "summed straight from the transport's "
                            + "buffers, no array between");
                }
            }
            // Already there when the receive comes: summed on delivery. The addend may be the target itself.
            INDArray matrix = pattern(DataType.FLOAT, new long[] {6, 5}, 33);
            c.rank(0).send(1, 33, matrix);
            c.rank(0).send(1, 34, Nd4j.scalar(1f));
            get(c.rank(1).receive(0, 34));
            INDArray acc = pattern(DataType.FLOAT, new long[] {30}, 35);
            INDArray expected = acc.add(matrix.reshape(30));
            assertSame(acc, get(c.rank(1).receiveSum(0, 33, acc, acc, pool)));
            assertSameArray(expected, acc);
            // In place while it arrives, too.
            INDArray acc2 = pattern(DataType.DOUBLE, new long[] {1 << 17}, 36);
            INDArray message2 = pattern(DataType.DOUBLE, new long[] {1 << 17}, 37);
            INDArray expected2 = acc2.add(message2);
            CompletableFuture<INDArray> inPlace = c.rank(1).receiveSum(0, 37, acc2, acc2, pool);
            c.rank(0).send(1, 37, message2);
            assertSameArray(expected2, get(inPlace));
            // Types without an in-transport sum still get one, on delivery.
            INDArray ints = Nd4j.createFromArray(1, 2, 3);
            CompletableFuture<INDArray> intSum = c.rank(1).receiveSum(0, 38, Nd4j.create(DataType.INT, 3),
                    Nd4j.createFromArray(10, 20, 30), pool);
            c.rank(0).send(1, 38, ints);
            assertSameArray(Nd4j.createFromArray(11, 22, 33), get(intSum));
            // An addend that does not match is refused at once, naming both.
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> c.rank(1).receiveSum(0,
                    39, Nd4j.create(DataType.FLOAT, 4), Nd4j.create(DataType.DOUBLE, 4), pool));
            assertTrue(e.getMessage().contains("the addend holds 4 DOUBLE, expected 4 FLOAT"), e.getMessage());
            // A message of another element count fails the receive; the next one still arrives.
            c.rank(0).send(1, 40, pattern(DataType.FLOAT, new long[] {8}, 40));
            c.rank(0).send(1, 40, pattern(DataType.FLOAT, new long[] {5}, 41));
            Throwable t = failure(c.rank(1).receiveSum(0, 40, Nd4j.create(DataType.FLOAT, 5),
                    Nd4j.zeros(DataType.FLOAT, 5), pool));
            assertTrue(t.getMessage().contains("into an array of 5 FLOAT: the message holds 8 FLOAT"),
                    t.getMessage());
            assertSameArray(pattern(DataType.FLOAT, new long[] {5}, 41), get(c.rank(1).receiveSum(0, 40,
                    Nd4j.create(DataType.FLOAT, 5), Nd4j.zeros(DataType.FLOAT, 5), pool)));
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void completesOnTheExecutorTheCallNames(Kind kind) throws Exception {
        java.util.concurrent.ExecutorService mine = java.util.concurrent.Executors.newSingleThreadExecutor(
                r -> new Thread(r, "caller-executor"));
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            // Posted before the message exists: the transport completes it, on the named executor.
            CompletableFuture<INDArray> received = c.rank(1).receive(0, 31, null, mine);
            CompletableFuture<String> where = received.thenApply(a -> Thread.currentThread().getName());
            CompletableFuture<Void> sent = c.rank(0).send(1, 31, pattern(DataType.FLOAT, new long[] {3 << 18}, 31),
                    mine);
            assertEquals("caller-executor", get(where));
            assertSameArray(pattern(DataType.FLOAT, new long[] {3 << 18}, 31), get(received));
            get(sent);
            // Into the caller's array as well.
            INDArray into = Nd4j.create(DataType.DOUBLE, 4);
            CompletableFuture<String> intoWhere = c.rank(1).receive(0, 32, into, mine)
                    .thenApply(a -> Thread.currentThread().getName());
            get(c.rank(0).send(1, 32, pattern(DataType.DOUBLE, new long[] {4}, 32), mine));
            assertEquals("caller-executor", get(intoWhere));
            assertSameArray(pattern(DataType.DOUBLE, new long[] {4}, 32), into);
            // An executor that refuses (shut down): the futures still complete, on the transport's own thread.
            java.util.concurrent.ExecutorService closed = java.util.concurrent.Executors.newSingleThreadExecutor();
            closed.shutdown();
            CompletableFuture<INDArray> late = c.rank(1).receive(0, 33, null, closed);
            get(c.rank(0).send(1, 33, pattern(DataType.FLOAT, new long[] {3 << 18}, 33), closed));
            assertSameArray(pattern(DataType.FLOAT, new long[] {3 << 18}, 33), get(late));
        } finally {
            mine.shutdownNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void carriesZeroLengthAndScalarArrays(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            INDArray[] arrays = {
                Nd4j.create(DataType.FLOAT, 0), Nd4j.create(DataType.DOUBLE, 2, 0, 3),
                Nd4j.scalar(DataType.DOUBLE, 2.5)
            };
            for (INDArray a : arrays) {
                c.rank(0).send(1, 4, a);
            }
            for (INDArray a : arrays) {
                INDArray r = get(c.rank(1).receive(0, 4));
                assertEquals(a.dataType(), r.dataType());
                assertArrayEquals(a.shape(), r.shape());
                if (!a.isEmpty()) {
                    assertEquals(a.getDouble(0), r.getDouble(0));
                }
            }
            assertEquals(8, c.rank(0).traffic().total(), "only the scalar double has payload bytes");
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void preservesTypeShapeAndValuesOfFloatAndDoubleArraysAndViews(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            INDArray matrix = pattern(DataType.DOUBLE, new long[] {6, 5}, 3);
            List<INDArray> sent = List.of(
                    pattern(DataType.FLOAT, new long[] {3, 1, 7, 2}, 1),
                    pattern(DataType.DOUBLE, new long[] {113}, 2),
                    matrix.get(NDArrayIndex.interval(2, 4), NDArrayIndex.all()), // contiguous view at an offset
                    matrix.transpose(), // not C-contiguous: sent as a C-ordered copy
                    matrix.getColumn(1),
                    pattern(DataType.FLOAT, new long[] {2, 3, 4}, 4).permute(2, 0, 1),
                    Nd4j.createFromArray(1, 2, 3));
            for (INDArray a : sent) {
                c.rank(0).send(1, 5, a);
            }
            for (INDArray a : sent) {
                INDArray r = get(c.rank(1).receive(0, 5));
                assertEquals('c', r.ordering());
                assertSameArray(a, r);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(60)
    void deliversManyTagsInFlightConcurrently(Kind kind) throws Exception {
        int p = 3;
        int tags = 24;
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try (TestCluster c = TestCluster.start(kind, p, TIMEOUT)) {
            List<CompletableFuture<INDArray>> receives = new ArrayList<>();
            List<INDArray> expected = new ArrayList<>();
            // Half of the receives are posted before the sends, half after.
            for (int to = 0; to < p; to++) {
                for (int from = 0; from < p; from++) {
                    for (int tag = 0; tag < tags; tag += 2) {
                        receives.add(c.rank(to).receive(from, tag));
                        expected.add(message(from, to, tag));
                    }
                }
            }
            List<CompletableFuture<Void>> sends = new ArrayList<>();
            for (int from = 0; from < p; from++) {
                for (int to = 0; to < p; to++) {
                    for (int tag = 0; tag < tags; tag++) {
                        int f = from;
                        int t = to;
                        int g = tag;
                        sends.add(CompletableFuture.supplyAsync(() -> c.rank(f).send(t, g, message(f, t, g)), pool)
                                .thenCompose(x -> x));
                    }
                }
            }
            for (int to = 0; to < p; to++) {
                for (int from = 0; from < p; from++) {
                    for (int tag = 1; tag < tags; tag += 2) {
                        receives.add(c.rank(to).receive(from, tag));
                        expected.add(message(from, to, tag));
                    }
                }
            }
            for (int i = 0; i < receives.size(); i++) {
                assertSameArray(expected.get(i), get(receives.get(i)));
            }
            for (CompletableFuture<Void> s : sends) {
                get(s);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(60)
    void losesNothingUnderBackPressureFromALateAndSlowReceiver(Kind kind) throws Exception {
        // Through the log, whose window the slow receiver fills; over IPC also by single copy, where the arrays wait
        // in the sender until the receiver reads them.
        lateAndSlowReceiver(kind, false);
        if (kind == Kind.AERON_IPC) {
            lateAndSlowReceiver(kind, true);
        }
    }

    private static void lateAndSlowReceiver(Kind kind, boolean singleCopy) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT, 1, b -> b.singleCopy(singleCopy))) {
            int n = 24;
            List<INDArray> sent = new ArrayList<>();
            List<CompletableFuture<Void>> sends = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                INDArray a = pattern(i % 2 == 0 ? DataType.FLOAT : DataType.DOUBLE, new long[] {256, 1024}, 100 + i);
                sent.add(a);
                sends.add(c.rank(0).send(1, 6, a));
            }
            Thread.sleep(500);
            c.startLate(1);
            // Once the first message is in (the handshake is done and data is flowing), the receiver's thread stops
            // polling for a while: the sender meets a full window. (Stalled earlier, the receiver would hold back
            // the handshake's acknowledgement instead, and the sender would wait without offering data.)
            assertSameArray(sent.get(0), get(c.rank(1).receive(0, 6)));
            c.stallReceiver(1, Duration.ofMillis(700));
            for (int i = 1; i < n; i++) {
                assertSameArray(sent.get(i), get(c.rank(1).receive(0, 6)));
                Thread.sleep(10);
            }
            for (CompletableFuture<Void> s : sends) {
                get(s);
            }
            if (singleCopy) {
                assertEquals(n, c.aeron(0).singleCopyMessages(), "each offered once the link was up, by single copy");
            } else if (c.onWire()) {
                assertTrue(c.aeron(0).backPressuredOffers() > 0, "the sender never met back pressure");
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void timesOutWithRankPeerTagAndWaitInTheMessage(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, SHORT)) {
            long start = System.nanoTime();
            Throwable t = failure(c.rank(0).receive(1, 77));
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            PeerTimeoutException e = assertInstanceOf(PeerTimeoutException.class, t);
            assertEquals(0, e.rank());
            assertEquals(1, e.peer());
            assertEquals(77, e.tag());
            assertTrue(e.getMessage().contains("rank 0") && e.getMessage().contains("peer rank 1")
                    && e.getMessage().contains("tag 77") && e.getMessage().contains(" ms"), e.getMessage());
            assertTrue(waitedMs >= SHORT.toMillis() - 50 && waitedMs < SHORT.toMillis() + 2000,
                    "waited " + waitedMs + " ms");
            // The transport still works after a timeout.
            c.rank(1).send(0, 78, Nd4j.scalar(1.0f));
            assertEquals(1.0f, get(c.rank(0).receive(1, 78)).getFloat(0));
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void closeFailsWaitingAndLaterCalls(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            exchange(c, 0, 1);
            CompletableFuture<INDArray> waiting = c.rank(0).receive(1, 8);
            c.rank(0).close();
            assertInstanceOf(TransportClosedException.class, failure(waiting));
            assertInstanceOf(TransportClosedException.class, failure(c.rank(0).receive(1, 8)));
            assertInstanceOf(TransportClosedException.class, failure(c.rank(0).send(1, 8, Nd4j.scalar(1f))));
            c.rank(0).close();
            // The peer learns that rank 0 left: its receives fail instead of waiting for the timeout.
            long start = System.nanoTime();
            PeerFailedException e = assertInstanceOf(PeerFailedException.class, failure(c.rank(1).receive(0, 9)));
            assertEquals(0, e.peer());
            assertTrue(System.nanoTime() - start < TIMEOUT.toNanos() / 2, "noticed only after the timeout");
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void failsWaitingReceivesWithinTimeoutWhenPeerDies(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 3, SHORT)) {
            exchange(c, 0, 1);
            exchange(c, 2, 1);
            CompletableFuture<INDArray> at0 = c.rank(0).receive(1, 10);
            CompletableFuture<INDArray> at2 = c.rank(2).receive(1, 10);
            long start = System.nanoTime();
            c.kill(1);
            for (CompletableFuture<INDArray> f : List.of(at0, at2)) {
                Throwable t = failure(f);
                assertTrue(t instanceof PeerFailedException || t instanceof PeerTimeoutException, t.toString());
                assertTrue(t.getMessage().contains("peer rank 1"), t.getMessage());
            }
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            // By then at the latest: a receive waits the timeout and a heartbeat (Aeron), plus room for a loaded
            // machine's threads to wake.
            assertTrue(waitedMs < SHORT.toMillis() + 2000, "noticed after " + waitedMs + " ms");
            // Once noticed (Aeron: by silence, at most the timeout after the death), calls on the dead peer fail at
            // once.
            if (c.onWire()) {
                long deadline = System.nanoTime() + SHORT.toNanos() + 1_000_000_000L;
                while ((c.aeron(0).peerFailure(1) == null || c.aeron(2).peerFailure(1) == null)
                        && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
            }
            assertInstanceOf(PeerFailedException.class, failure(c.rank(0).receive(1, 11)));
            assertInstanceOf(PeerFailedException.class, failure(c.rank(2).send(1, 11, Nd4j.scalar(1f))));
            // The survivors still talk to each other.
            c.rank(0).send(2, 12, Nd4j.scalar(5f));
            assertEquals(5f, get(c.rank(2).receive(0, 12)).getFloat(0));
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void detectsACorruptedChunkAndDeliversNeitherItNorAHang(Kind kind) throws Exception {
        // Over IPC the payload checksum is optional (off by default): this runs IPC with it on.
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT, -1, true)) {
            assumeTrue(c.onWire(), "in-JVM messages have no wire to corrupt");
            INDArray damaged = pattern(DataType.FLOAT, new long[] {3 << 18}, 7); // 3 MB: several chunks
            INDArray next = pattern(DataType.FLOAT, new long[] {1000}, 8);
            c.corruptNextChunk(0, 1);
            c.rank(0).send(1, 13, damaged);
            c.rank(0).send(1, 13, next);
            CorruptMessageException e = assertInstanceOf(CorruptMessageException.class,
                    failure(c.rank(1).receive(0, 13)));
            assertTrue(e.getMessage().contains("checksum"), e.getMessage());
            assertSameArray(next, get(c.rank(1).receive(0, 13)));
            assertEquals(1, c.aeron(1).corruptMessages());
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void dropsAndCountsMessagesFromATransportWithAnotherToken(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            assumeTrue(c.onWire(), "in-JVM groups are closed: nothing outside can address them");
            AeronTransport intruder = c.intruder(1);
            intruder.ignoreAcknowledgements();              // its data goes on the wire after its HELLO
            get(intruder.send(0, 14, Nd4j.scalar(-1f)));
            long deadline = System.nanoTime() + TIMEOUT.toNanos();
            while (c.aeron(0).droppedMessages() < 2 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertTrue(c.aeron(0).droppedMessages() >= 2, "HELLO and data of the intruder were not both dropped");
            c.rank(1).send(0, 14, Nd4j.scalar(1f));
            assertEquals(1f, get(c.rank(0).receive(1, 14)).getFloat(0));
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void deliversSelfSendsLocallyAndCountsBytesPerPeerAndTag(Kind kind) throws Exception {
        try (TestCluster c = TestCluster.start(kind, 3, TIMEOUT)) {
            INDArray a = pattern(DataType.DOUBLE, new long[] {4, 4}, 9);
            get(c.rank(1).send(1, 15, a));
            get(c.rank(1).send(0, 15, a));
            get(c.rank(1).send(2, 16, pattern(DataType.FLOAT, new long[] {10}, 10)));
            a.assign(0); // the sender may reuse its array once the send completed
            assertSameArray(pattern(DataType.DOUBLE, new long[] {4, 4}, 9), get(c.rank(1).receive(1, 15)));
            assertSameArray(pattern(DataType.DOUBLE, new long[] {4, 4}, 9), get(c.rank(0).receive(1, 15)));
            get(c.rank(2).receive(1, 16));
            TrafficCounter traffic = c.rank(1).traffic();
            assertEquals(128, traffic.toPeer(0));
            assertEquals(40, traffic.toPeer(2));
            assertEquals(0, traffic.toPeer(1), "self-sends do not travel and are not counted");
            assertEquals(128, traffic.withTag(15));
            assertEquals(40, traffic.toPeerWithTag(2, 16));
            assertEquals(168, traffic.total());
        }
    }

    @ParameterizedTest
    @EnumSource(Kind.class)
    @Timeout(30)
    void rejectsBadPeerTagAndTypeSynchronously(Kind kind) {
        try (TestCluster c = TestCluster.start(kind, 2, TIMEOUT)) {
            Transport t = c.rank(0);
            assertThrows(IllegalArgumentException.class, () -> t.send(2, 0, Nd4j.scalar(1f)));
            assertThrows(IllegalArgumentException.class, () -> t.send(1, -1, Nd4j.scalar(1f)));
            assertThrows(IllegalArgumentException.class, () -> t.receive(-1, 0));
            assertThrows(IllegalArgumentException.class, () -> t.send(1, 0, Nd4j.create(DataType.BOOL, 2)));
            assertThrows(IllegalArgumentException.class, () -> t.send(1, 0, null));
        }
    }

    /** Rank a and rank b send each other a message, so that their connection is established (HELLOs seen). */
    private static void exchange(TestCluster c, int a, int b) throws Exception {
        c.rank(a).send(b, 999, Nd4j.scalar(1f));
        c.rank(b).send(a, 999, Nd4j.scalar(1f));
        get(c.rank(a).receive(b, 999));
        get(c.rank(b).receive(a, 999));
    }

    /** A test array whose values depend on seed and position. */
    static INDArray pattern(DataType type, long[] shape, long seed) {
        INDArray a = Nd4j.createUninitialized(type, shape, 'c');
        ByteBuffer b = ArrayBytes.bytes(a);
        SplittableRandom rnd = new SplittableRandom(seed);
        long n = a.length();
        if (type == DataType.FLOAT) {
            var f = b.order(ByteOrder.nativeOrder()).asFloatBuffer();
            for (int i = 0; i < n; i++) {
                f.put(i, (float) rnd.nextGaussian());
            }
        } else {
            var d = b.order(ByteOrder.nativeOrder()).asDoubleBuffer();
            for (int i = 0; i < n; i++) {
                d.put(i, rnd.nextGaussian());
            }
        }
        return a;
    }

    private static INDArray message(int from, int to, int tag) {
        return pattern(tag % 2 == 0 ? DataType.FLOAT : DataType.DOUBLE, new long[] {1 + tag % 5, 3}, from * 10_000L
                + to * 100L + tag);
    }

    /** Same type, shape, and bytes (bit-exact), with {@code actual} a C-ordered array. */
    static void assertSameArray(INDArray expected, INDArray actual) {
        assertEquals(expected.dataType(), actual.dataType());
        assertArrayEquals(expected.shape(), actual.shape());
        INDArray e = ArrayBytes.contiguous(expected);
        assertTrue(ArrayBytes.bytes(e).equals(ArrayBytes.bytes(actual)), "array contents differ");
    }

    static <T> T get(CompletableFuture<T> f) throws Exception {
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }

    /** Waits for {@code f} to fail and returns why. */
    static Throwable failure(CompletableFuture<?> f) throws InterruptedException, TimeoutException {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("expected a failure, got a result");
    }
}
