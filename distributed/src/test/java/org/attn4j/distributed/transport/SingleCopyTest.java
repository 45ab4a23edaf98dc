package org.attn4j.distributed.transport;

import static org.attn4j.distributed.transport.TransportConformanceTest.assertSameArray;
import static org.attn4j.distributed.transport.TransportConformanceTest.get;
import static org.attn4j.distributed.transport.TransportConformanceTest.pattern;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

import org.attn4j.distributed.transport.TestCluster.Kind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Large arrays between same-host peers by single copy (the receiver copies them from the sender's memory with
 * {@code process_vm_readv}), and the shared log where that is off or refused. The transports of one test share a
 * process, which reads its own memory as it would a peer's; the process tests run the same path between processes.
 */
class SingleCopyTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(20);

    @Test
    @Timeout(60)
    void sendsLargeArraysBySingleCopyAndSmallOnesThroughTheLog() throws Exception {
        try (TestCluster c = TestCluster.start(Kind.AERON_IPC, 2, TIMEOUT)) {
            INDArray large = pattern(DataType.FLOAT, new long[] {64, 4096}, 1);      // 1 MiB
            CompletableFuture<Void> sent = c.rank(0).send(1, 1, large);
            assertSameArray(large, get(c.rank(1).receive(0, 1)));
            get(sent);
            assertEquals(1, c.aeron(0).singleCopyMessages(), "the 1 MiB array went by single copy");

            INDArray small = pattern(DataType.FLOAT, new long[] {1000}, 2);          // 4 KB: through the log
            c.rank(0).send(1, 2, small);
            assertSameArray(small, get(c.rank(1).receive(0, 2)));
            assertEquals(1, c.aeron(0).singleCopyMessages());

            // Straight into the caller's array, a view with elements around it left untouched.
            INDArray doubles = pattern(DataType.DOUBLE, new long[] {(1 << 16) + 3}, 3);
            INDArray target = Nd4j.valueArrayOf(new long[] {(1 << 16) + 203}, -7.0, DataType.DOUBLE);
            INDArray into = target.get(NDArrayIndex.interval(100, 100 + (1 << 16) + 3));
            CompletableFuture<INDArray> posted = c.rank(1).receive(0, 3, into);
            c.rank(1).send(0, 3, doubles);                                             // the other way too
            c.rank(0).send(1, 3, doubles);
            assertSame(into, get(posted));
            assertSameArray(doubles, into);
            assertEquals(-7.0, target.getDouble(99));
            assertEquals(-7.0, target.getDouble(100 + (1 << 16) + 3));
            assertSameArray(doubles, get(c.rank(0).receive(1, 3)));
            assertEquals(2, c.aeron(0).singleCopyMessages());
            assertEquals(1, c.aeron(1).singleCopyMessages());
        }
    }

    @Test
    @Timeout(60)
    void addsASingleCopyMessageToTheAddendAsItReadsIt() throws Exception {
        Executor pool = TransportThreads.completer();
        try (TestCluster c = TestCluster.start(Kind.AERON_IPC, 2, TIMEOUT)) {
            for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE}) {
                int tag = type == DataType.FLOAT ? 11 : 12;
                long n = (3 << 17) + 5;                // more than one piece of the receiver's read, an odd count
                INDArray message = pattern(type, new long[] {n}, tag);
                INDArray addend = pattern(type, new long[] {n}, tag + 100);
                INDArray expected = message.add(addend);
                INDArray into = Nd4j.createUninitialized(type, n);
                long direct = c.aeron(1).directReceives();
                CompletableFuture<INDArray> posted = c.rank(1).receiveSum(0, tag, into, addend, pool);
                c.rank(0).send(1, tag, message);
                assertSame(into, get(posted));
                assertSameArray(expected, into);       // the same bits as ND4J's add
                assertEquals(direct + 1, c.aeron(1).directReceives(), "summed as it was read, no array between");
            }
            assertEquals(2, c.aeron(0).singleCopyMessages());
        }
    }

    @Test
    @Timeout(60)
    void goesThroughTheLogWhenSingleCopyIsOffOrTheKernelRefusesIt() throws Exception {
        INDArray large = pattern(DataType.FLOAT, new long[] {1 << 18}, 4);
        try (TestCluster c = TestCluster.start(Kind.AERON_IPC, 2, TIMEOUT, b -> b.singleCopy(false))) {
            c.rank(0).send(1, 1, large);
            assertSameArray(large, get(c.rank(1).receive(0, 1)));
            assertEquals(0, c.aeron(0).singleCopyMessages());
        }
        try (TestCluster c = TestCluster.start(Kind.AERON_IPC, 2, TIMEOUT, b -> b.ipcChecksums(true))) {
            c.rank(0).send(1, 1, large);
            assertSameArray(large, get(c.rank(1).receive(0, 1)));
            assertEquals(0, c.aeron(0).singleCopyMessages(), "a payload read from the sender carries no checksum");
        }
        ProcessMemory.refuseProbes = true;
        try (TestCluster c = TestCluster.start(Kind.AERON_IPC, 2, TIMEOUT)) {
            c.rank(0).send(1, 1, large);
            assertSameArray(large, get(c.rank(1).receive(0, 1)));
            assertEquals(0, c.aeron(0).singleCopyMessages(), "the peer could not read it: through the log");
        } finally {
            ProcessMemory.refuseProbes = false;
        }
    }

    @Test
    @Timeout(120)
    void aPeerThatClosesRightAfterItsReceiveReleasesTheArrayFirst() throws Exception {
        INDArray large = pattern(DataType.FLOAT, new long[] {1 << 18}, 5);
        for (int i = 0; i < 10; i++) {
            try (TestCluster c = TestCluster.start(Kind.AERON_IPC, 2, TIMEOUT)) {
                CompletableFuture<Void> sent = c.rank(0).send(1, 1, large);
                assertSameArray(large, get(c.rank(1).receive(0, 1)));
                c.rank(1).close();                        // its release goes out before its goodbye
                get(sent);
                assertEquals(1, c.aeron(0).singleCopyMessages());
            }
        }
    }
}
