package org.attn4j.distributed.transport;

import static org.attn4j.distributed.transport.TransportConformanceTest.assertSameArray;
import static org.attn4j.distributed.transport.TransportConformanceTest.failure;
import static org.attn4j.distributed.transport.TransportConformanceTest.get;
import static org.attn4j.distributed.transport.TransportConformanceTest.pattern;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.attn4j.distributed.launch.WorkerEnvironment;
import org.attn4j.distributed.testing.Ranks;

import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.attn4j.distributed.transport.TestCluster.Kind;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** What only the Aeron transport has: its configuration, an external driver, its wire layout, send timeouts. */
class AeronTransportTest {

    private static final String TOKEN = "a-test-token-of-the-job";

    private static final List<String> ENDPOINTS = List.of("127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003");

    @Test
    @Timeout(30)
    void usesAnExternalMediaDriverWhenADirectoryIsGiven() throws Exception {
        String dir = new File(shmRoot(), "attn4j-test-external-" + ProcessHandle.current().pid()).getPath();
        try (MediaDriver driver = MediaDriver.launch(new MediaDriver.Context().aeronDirectoryName(dir)
                .threadingMode(ThreadingMode.SHARED).sharedIdleStrategy(new BackoffIdleStrategy(10, 20, 1_000,
                        1_000_000)).dirDeleteOnStart(true).dirDeleteOnShutdown(true))) {
            List<String> endpoints = freeEndpoints();
            AeronTransportContext.Builder b = AeronTransportContext.builder().endpoints(endpoints)
                    .jobToken(TOKEN).aeronDirectory(driver.aeronDirectoryName());
            try (AeronTransport t0 = new AeronTransport(b.rank(0).build());
                 AeronTransport t1 = new AeronTransport(b.rank(1).build())) {
                assertFalse(t0.context().embeddedDriver());
                INDArray a = pattern(DataType.FLOAT, new long[] {3 << 18}, 21);
                t0.send(1, 1, a);
                assertSameArray(a, get(t1.receive(0, 1)));
            }
        }
        assertFalse(new File(dir).exists(), "the external driver's directory outlived it");
    }

    @Test
    @Timeout(30)
    void countsADriverAliveBetweenItsHeartbeatsAndOneLongSilentAsLost() throws Exception {
        // Aeron's driver writes its heartbeat once a second: a driver whose last one is 1.5 s old lives.
        String dir = new File(shmRoot(), "attn4j-test-heartbeat-" + ProcessHandle.current().pid()).getPath();
        try (MediaDriver driver = MediaDriver.launch(new MediaDriver.Context().aeronDirectoryName(dir)
                .threadingMode(ThreadingMode.SHARED).dirDeleteOnStart(true).dirDeleteOnShutdown(true));
             AeronTransport t = new AeronTransport(AeronTransportContext.builder().endpoints(freeEndpoints())
                     .jobToken(TOKEN).rank(0).aeronDirectory(driver.aeronDirectoryName()).build())) {
            assertFalse(t.hostsMediaDriver());
            setDriverHeartbeat(t, System.currentTimeMillis() - 1_500);
            assertTrue(t.driverAlive(), "a driver whose heartbeat is 1.5 s old counted as lost");
            // One silent for ten seconds is gone. The driver may write a fresh heartbeat between the two calls:
            // a few tries.
            boolean lost = false;
            for (int i = 0; i < 3 && !lost; i++) {
                setDriverHeartbeat(t, System.currentTimeMillis() - 10_000);
                lost = !t.driverAlive();
            }
            assertTrue(lost, "a driver silent for 10 s counted as alive");
        }
        // A driver in this process lives as long as the transport, whatever its heartbeat says.
        AeronTransportContext.Builder b = AeronTransportContext.builder().endpoints(freeEndpoints()).jobToken(TOKEN)
                .sameHostIpc(false).rank(0);
        try (AeronTransport t = new AeronTransport(b.build())) {
            setDriverHeartbeat(t, 0);
            assertTrue(t.driverAlive(), "this rank's own driver counted as lost");
        }
    }

    /** Overwrites the heartbeat time (epoch ms) that the media driver of {@code t} last wrote. */
    private static void setDriverHeartbeat(AeronTransport t, long epochMs) {
        java.nio.MappedByteBuffer cnc = org.agrona.IoUtil.mapExistingFile(
                new File(t.aeronDirectoryName(), io.aeron.CncFileDescriptor.CNC_FILE), "cnc");
        try {
            UnsafeBuffer meta = io.aeron.CncFileDescriptor.createMetaDataBuffer(cnc);
            new org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer(
                    io.aeron.CncFileDescriptor.createToDriverBuffer(cnc, meta)).consumerHeartbeatTime(epochMs);
        } finally {
            org.agrona.IoUtil.unmap(cnc);
        }
    }

    @Test
    @Timeout(30)
    void deletesTheEmbeddedDriverDirectoryOnClose() throws Exception {
        String token = "dir-test-" + System.nanoTime();
        String prefix = "attn4j-" + new JobToken(token) + "-rank";
        AeronTransportContext.Builder b = AeronTransportContext.builder().endpoints(freeEndpoints()).jobToken(token)
                .sameHostIpc(false);
        AeronTransport t0 = new AeronTransport(b.rank(0).build());
        AeronTransport t1 = new AeronTransport(b.rank(1).build());
        assertEquals(2, driverDirectories(prefix).length);
        t0.close();
        t1.close();
        assertEquals(0, driverDirectories(prefix).length);
    }

    @Test
    @Timeout(30)
    void sharesOneHostDriverBetweenSameHostRanksAndDeletesItWithTheLast() throws Exception {
        String token = "host-dir-test-" + System.nanoTime();
        String prefix = "attn4j-" + new JobToken(token) + "-host";
        AeronTransportContext.Builder b = AeronTransportContext.builder().endpoints(freeEndpoints()).jobToken(token);
        AeronTransport t0 = new AeronTransport(b.rank(0).build());
        AeronTransport t1 = new AeronTransport(b.rank(1).build());
        // The driver's directory and its lock file, and one lock file per rank.
        assertEquals(4, driverDirectories(prefix).length);
        t0.send(1, 1, Nd4j.scalar(2f));
        assertEquals(2f, get(t1.receive(0, 1)).getFloat(0));
        t0.close();
        t1.send(1, 1, Nd4j.scalar(3f));                      // rank 0 leaving does not take the driver away
        assertEquals(3f, get(t1.receive(1, 1)).getFloat(0));
        t1.close();
        long deadline = System.nanoTime() + 5_000_000_000L;  // closed in the background once no client is left
        while (driverDirectories(prefix).length > 0 && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(0, driverDirectories(prefix).length);
    }

    @Test
    @Timeout(30)
    void refusesASecondTransportForTheSameRankOnTheSameHost() throws Exception {
        AeronTransportContext.Builder b = AeronTransportContext.builder().rank(0).endpoints(freeEndpoints())
                .jobToken("same-rank-test-" + System.nanoTime());
        try (AeronTransport first = new AeronTransport(b.build())) {
            TransportException e = assertThrows(TransportException.class, () -> new AeronTransport(b.build()));
            assertTrue(e.getMessage().contains("rank 0 of this job already runs on this host"), e.getMessage());
            first.send(0, 1, Nd4j.scalar(1f));
            assertEquals(1f, get(first.receive(0, 1)).getFloat(0));
        }
    }

    @Test
    @Timeout(30)
    void failsToStartWhenItsPortIsTaken() throws Exception {
        AeronTransportContext.Builder b = AeronTransportContext.builder().rank(0).endpoints(freeEndpoints())
                .jobToken(TOKEN).sameHostIpc(false);
        try (AeronTransport first = new AeronTransport(b.build())) {
            TransportException e = assertThrows(TransportException.class, () -> new AeronTransport(b.build()));
            assertTrue(e.getMessage().contains("rank 0") && e.getMessage().contains(first.context().endpoints()
                    .get(0)), e.getMessage());
            // The first one is unharmed.
            first.send(0, 1, Nd4j.scalar(1f));
            assertEquals(1f, get(first.receive(0, 1)).getFloat(0));
        }
    }

    /**
     * Workers that open one transport after another on the same endpoints (one phase of a job, then the next)
     * run out of step: rank 1's second transport starts while rank 0's first is still open, so its HELLO reaches
     * that one, and Aeron hands the connection to rank 0's second transport in mid-stream. Nothing may be lost.
     */
    @Test
    @Timeout(60)
    void transportsOpenedOneAfterAnotherOnTheSameEndpointsLoseNothing() throws Exception {
        AeronTransportContext.Builder b = AeronTransportContext.builder().endpoints(freeEndpoints()).jobToken(TOKEN)
                .timeout(Duration.ofSeconds(20));
        INDArray first = pattern(DataType.FLOAT, new long[] {1000}, 31);
        INDArray second = pattern(DataType.FLOAT, new long[] {3 << 18}, 32);
        AeronTransport rank0 = new AeronTransport(b.rank(0).build());
        AeronTransport rank1 = new AeronTransport(b.rank(1).build());
        rank0.send(1, 1, first);
        assertSameArray(first, get(rank1.receive(0, 1)));
        rank1.send(0, 1, first);
        assertSameArray(first, get(rank0.receive(1, 1)));

        rank1.close();
        AeronTransport nextRank1 = new AeronTransport(b.rank(1).build());
        try {
            var sent = nextRank1.send(0, 2, second);
            long deadline = System.nanoTime() + 10_000_000_000L;  // its HELLO goes to rank 0's first transport
            while (rank0.droppedMessages() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertTrue(rank0.droppedMessages() > 0, "the next transport's HELLO did not reach the first one");
            rank0.close();
            try (AeronTransport nextRank0 = new AeronTransport(b.rank(0).build())) {
                assertSameArray(second, get(nextRank0.receive(1, 2)));
                get(sent);
                nextRank0.send(1, 3, first);
                assertSameArray(first, get(nextRank1.receive(0, 3)));
            }
        } finally {
            nextRank1.close();
        }
    }

    @ParameterizedTest
    @EnumSource(value = Kind.class, names = {"AERON_IPC", "AERON_UDP", "AERON_TCP"})
    @Timeout(30)
    void failsASilentPeerWithinTheTimeout(Kind kind) throws Exception {
        Duration timeout = Duration.ofMillis(1500);
        try (TestCluster c = TestCluster.start(kind, 2, timeout)) {
            c.rank(1).send(0, 1, pattern(DataType.FLOAT, new long[] {4}, 1));
            get(c.rank(0).receive(1, 1));
            Duration silence = Duration.ofMillis(8000);
            c.aeron(1).silence(silence);                  // alive, connected, but no message and no heartbeat
            long start = System.nanoTime();
            Throwable t = failure(c.rank(0).receive(1, 2));
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            assertInstanceOf(PeerFailedException.class, t, () -> String.valueOf(t));
            assertTrue(waitedMs < silence.toMillis(), "failed after " + waitedMs + " ms, with a timeout of "
                    + timeout.toMillis() + " ms and a peer silent for " + silence.toMillis());
            assertTrue(c.aeron(0).peerFailure(1) != null && c.aeron(0).peerFailure(1).contains("silent"),
                    "rank 1 is failed for its silence: " + c.aeron(0).peerFailure(1));
        }
    }

    /**
     * A transport closed while its thread cannot run (here: silenced, as on a machine whose cores are taken) still
     * tells its peers goodbye once the thread runs again: over UDP they would otherwise learn of it only after the
     * timeout of silence.
     */
    @Test
    @Timeout(30)
    void aCloseWhileItsThreadIsHeldUpStillSaysGoodbye() throws Exception {
        try (TestCluster c = TestCluster.start(Kind.AERON_UDP, 2, Duration.ofSeconds(10))) {
            c.rank(0).send(1, 1, pattern(DataType.FLOAT, new long[] {4}, 1));
            get(c.rank(1).receive(0, 1));
            c.aeron(0).silence(Duration.ofMillis(2500));
            long start = System.nanoTime();
            c.rank(0).close();
            Throwable t = failure(c.rank(1).receive(0, 2));
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            PeerFailedException e = assertInstanceOf(PeerFailedException.class, t, () -> String.valueOf(t));
            assertTrue(e.peerClosed(), e.getMessage());
            assertTrue(waitedMs < 8000, "learnt of the close after " + waitedMs + " ms");
        }
    }

    /**
     * A receive or a send about to time out on a peer that fell silent names the peer failed, not timed out, even
     * when the receiving thread (whose liveness check would say so) has not looked: here it is stalled.
     */
    @ParameterizedTest
    @EnumSource(value = Kind.class, names = {"AERON_IPC", "AERON_UDP", "AERON_TCP"})
    @Timeout(30)
    void aCallAboutToTimeOutOnASilentPeerNamesItFailed(Kind kind) throws Exception {
        for (String call : List.of("receive", "send")) {
            try (TestCluster c = TestCluster.start(kind, 2, Duration.ofMillis(1500))) {
                c.rank(1).send(0, 1, pattern(DataType.FLOAT, new long[] {4}, 1));
                get(c.rank(0).receive(1, 1));
                c.rank(0).send(1, 1, pattern(DataType.FLOAT, new long[] {4}, 1));
                get(c.rank(1).receive(0, 1));
                Duration silence = Duration.ofMillis(8000);
                c.aeron(1).silence(silence);
                c.stallReceiver(0, silence);
                Throwable t = failure(call.equals("receive") ? c.rank(0).receive(1, 2)
                        : c.rank(0).send(1, 2, pattern(DataType.FLOAT, new long[] {8 << 20}, 2)));
                assertInstanceOf(PeerFailedException.class, t, () -> call + ": " + t);
                assertTrue(t.getMessage().contains("silent for"), call + ": " + t.getMessage());
            }
        }
    }

    @ParameterizedTest
    @EnumSource(value = Kind.class, names = {"AERON_IPC", "AERON_UDP", "AERON_TCP"})
    @Timeout(30)
    void failsASendStuckBehindBackPressureWithinTheTimeout(Kind kind) throws Exception {
        Duration timeout = Duration.ofMillis(1500);
        try (TestCluster c = TestCluster.start(kind, 2, timeout)) {
            c.rank(0).send(1, 1, pattern(DataType.FLOAT, new long[] {4}, 1));
            get(c.rank(1).receive(0, 1));
            Duration stall = Duration.ofMillis(6000);
            c.stallReceiver(1, stall);
            long start = System.nanoTime();
            Throwable t = failure(c.rank(0).send(1, 2, pattern(DataType.FLOAT, new long[] {8 << 20}, 2)));
            long waitedMs = (System.nanoTime() - start) / 1_000_000;
            PeerTimeoutException e = assertInstanceOf(PeerTimeoutException.class, t, () -> String.valueOf(t));
            assertTrue(e.getMessage().contains("back pressure") && e.getMessage().contains("tag 2"), e.getMessage());
            if (kind == Kind.AERON_IPC) {
                // Over IPC the 32 MB array went by single copy: the peer never read it, so it was never released.
                assertEquals(1, c.aeron(0).singleCopyMessages());
                assertTrue(e.getMessage().contains("has not read the array"), e.getMessage());
            }
            // It gave up, rather than waiting the stall out: no bound on how fast (a loaded machine is slow).
            assertTrue(waitedMs < stall.toMillis(), "failed after " + waitedMs
                    + " ms, with a timeout of " + timeout.toMillis() + " ms and a receiver stalled for "
                    + stall.toMillis());
            // The stuck peer counts as failed from then on.
            assertInstanceOf(PeerFailedException.class, failure(c.rank(0).send(1, 3, pattern(DataType.FLOAT,
                    new long[] {4}, 3))));
        }
    }

    @Test
    @Timeout(10)
    void readsTheTransportSettingsAndTellsWhichPeersShareTheHost() {
        Map<String, String> env = new HashMap<>();
        env.put(WorkerEnvironment.RANK, "1");
        env.put(WorkerEnvironment.WORLD_SIZE, "4");
        env.put(WorkerEnvironment.PEERS, "127.0.0.1:40001,127.0.0.2:40002,10.0.0.7:40003,10.0.0.8:40004");
        env.put(WorkerEnvironment.JOB_TOKEN, "secret-token-of-the-test-job");
        AeronTransportContext c = AeronTransportContext.fromEnvironment(env);
        assertTrue(c.sameHostIpc() && !c.ipcChecksums());
        assertTrue(c.ipcPeer(0), "every loopback address is this host");
        assertFalse(c.ipcPeer(1), "not itself");
        assertFalse(c.ipcPeer(2) || c.ipcPeer(3), "other hosts go over UDP");
        assertEquals(2, c.localRanks());
        env.put(AeronTransportContext.ENV_IPC, "0");
        env.put(AeronTransportContext.ENV_IPC_CHECKSUMS, "1");
        env.put(AeronTransportContext.ENV_IDLE, "PARK");
        AeronTransportContext d = AeronTransportContext.fromEnvironment(env);
        assertFalse(d.ipcPeer(0));
        assertTrue(d.ipcChecksums());
        assertEquals(AeronTransportContext.ProgressIdle.PARK, d.progressIdle());
        env.put(AeronTransportContext.ENV_IDLE, "busy");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> AeronTransportContext.fromEnvironment(env));
        assertEquals("ATTN4J_TRANSPORT_IDLE: expected spin, yield or park, got 'busy'", e.getMessage());
        env.remove(AeronTransportContext.ENV_IDLE);
        env.put(AeronTransportContext.ENV_IPC, "yes");
        e = assertThrows(IllegalArgumentException.class, () -> AeronTransportContext.fromEnvironment(env));
        assertEquals("ATTN4J_TRANSPORT_IPC: expected 1 or 0, got 'yes'", e.getMessage());
        // The waiting default follows the cores each rank on the host gets.
        assertEquals(AeronTransportContext.ProgressIdle.SPIN, AeronTransportContext.ProgressIdle.defaultFor(8, 4));
        assertEquals(AeronTransportContext.ProgressIdle.YIELD, AeronTransportContext.ProgressIdle.defaultFor(2, 2));
        assertEquals(AeronTransportContext.ProgressIdle.PARK, AeronTransportContext.ProgressIdle.defaultFor(2, 4));
    }

    @Test
    @Timeout(10)
    void lockFilesOfAJobWhoseDriverIsGoneAreRemovedAfterAMinute(@org.junit.jupiter.api.io.TempDir java.nio.file.Path
            root) throws Exception {
        java.io.File old = root.resolve("attn4j-0123456789abcdef-host89abcdef.rank2.lock").toFile();
        java.io.File recent = root.resolve("attn4j-0123456789abcdef-host89abcdef.rank3.lock").toFile();
        java.io.File live = root.resolve("attn4j-fedcba9876543210-host89abcdef.rank1.lock").toFile();
        java.io.File other = root.resolve("not-attn4j-0123456789abcdef-host89abcdef.lock").toFile();
        for (java.io.File f : new java.io.File[] {old, recent, live, other}) {
            assertTrue(f.createNewFile());
        }
        assertTrue(root.resolve("attn4j-fedcba9876543210-host89abcdef").toFile().mkdir(), "a running job's driver");
        long twoMinutesAgo = System.currentTimeMillis() - 120_000;
        for (java.io.File f : new java.io.File[] {old, live, other}) {
            assertTrue(f.setLastModified(twoMinutesAgo));
        }
        HostDriver.removeStale(root.toFile(), 1000);
        assertFalse(old.exists(), "an old lock file whose driver directory is gone");
        assertTrue(recent.exists(), "a recent one may belong to a job starting now");
        assertTrue(live.exists(), "its job's driver directory exists");
        assertTrue(other.exists(), "not attn4j's");
    }

    @Test
    @Timeout(10)
    void aStaleDriverDirectoryWhoseCncFileCannotBeReadIsLeftAndDoesNotStopTheStart(
            @org.junit.jupiter.api.io.TempDir java.nio.file.Path root) throws Exception {
        // As when another rank starting on this host deletes the same stale directory while this one reads it:
        // Aeron's check finds a CnC file it cannot read (here one a driver never initialised) and throws.
        java.io.File unreadable = root.resolve("attn4j-0123456789abcdef-host89abcdef").toFile();
        java.io.File gone = root.resolve("attn4j-fedcba9876543210-host89abcdef").toFile();
        assertTrue(unreadable.mkdir());
        assertTrue(gone.mkdir());
        java.nio.file.Files.write(unreadable.toPath().resolve("cnc.dat"), new byte[64 << 10]);
        long twoMinutesAgo = System.currentTimeMillis() - 120_000;
        assertTrue(unreadable.setLastModified(twoMinutesAgo));
        assertTrue(gone.setLastModified(twoMinutesAgo));
        HostDriver.removeStale(root.toFile(), 200);
        assertTrue(unreadable.exists(), "left in place: a live driver's directory must never be deleted on a doubt");
        assertFalse(gone.exists(), "a stale directory without a driver is still removed");
    }

    @Test
    @Timeout(20)
    void aHostDriverDirectoryLeftHalfWrittenIsReplacedByANewDriver(
            @org.junit.jupiter.api.io.TempDir java.nio.file.Path root) throws Exception {
        // A driver killed while it started, in the directory a job run again under the same token uses.
        java.nio.file.Path dir = root.resolve("attn4j-0123456789abcdef-host89abcdef");
        java.nio.file.Files.createDirectories(dir);
        java.nio.file.Files.write(dir.resolve("cnc.dat"), new byte[64 << 10]);
        HostDriver h = HostDriver.acquire(dir.toString(), () -> new io.aeron.driver.MediaDriver.Context()
                .threadingMode(io.aeron.driver.ThreadingMode.SHARED), 200);
        try {
            assertTrue(h.owned(), "a new driver runs in the directory");
            assertTrue(io.aeron.CommonContext.isDriverActive(dir.toFile(), 5_000, s -> { }));
        } finally {
            h.release(java.time.Duration.ZERO);
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        // The watcher deletes the directory, then the lock file beside it: wait for both, lest the test's own
        // cleanup race the watcher for the lock file.
        java.nio.file.Path lock = root.resolve(dir.getFileName() + ".lock");
        while ((java.nio.file.Files.exists(dir.resolve("cnc.dat")) || java.nio.file.Files.exists(lock))
                && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertFalse(java.nio.file.Files.exists(dir.resolve("cnc.dat")), "closed once unused, its directory deleted");
        assertFalse(java.nio.file.Files.exists(lock), "and its lock file");
    }

    @Test
    @Timeout(10)
    void theUdpMtuIsAerons1408OffLoopbackAndFollowsTheLinkOnlyWhenAsked() throws Exception {
        // A link's MTU less the IP and UDP headers, to a multiple of 32, within Aeron's 1408..65504.
        assertEquals(1472, AeronTransportContext.Builder.udpMtu(1500, false));
        assertEquals(8960, AeronTransportContext.Builder.udpMtu(9000, false));
        assertEquals(8928, AeronTransportContext.Builder.udpMtu(9000, true));
        assertEquals(65504, AeronTransportContext.Builder.udpMtu(65536, false));
        assertEquals(1408, AeronTransportContext.Builder.udpMtu(1280, true));
        // The loopback interface (MTU 65536 on Linux) carries 127.0.0.1; no local interface has 198.51.100.1.
        assertEquals(65504, AeronTransportContext.Builder.linkMtu("127.0.0.1"));
        assertEquals(1408, AeronTransportContext.Builder.linkMtu("198.51.100.1"));
        Map<String, String> env = new HashMap<>();
        env.put(WorkerEnvironment.RANK, "0");
        env.put(WorkerEnvironment.WORLD_SIZE, "2");
        env.put(WorkerEnvironment.JOB_TOKEN, "secret-token-of-the-test-job");
        env.put(WorkerEnvironment.PEERS, "127.0.0.1:40001,127.0.0.1:40002");
        assertEquals(65504, AeronTransportContext.fromEnvironment(env).mtu(), "all on loopback");
        // This host's own non-loopback address, if it has one: 1408 unless the link is asked for.
        java.util.Optional<java.net.InterfaceAddress> own = java.util.Collections.list(
                java.net.NetworkInterface.getNetworkInterfaces()).stream().filter(n -> {
                    try {
                        return n.isUp() && !n.isLoopback();
                    } catch (java.net.SocketException ex) {
                        return false;
                    }
                }).flatMap(n -> n.getInterfaceAddresses().stream())
                .filter(a -> a.getAddress() instanceof java.net.Inet4Address).findFirst();
        if (own.isPresent()) {
            java.net.InetAddress address = own.get().getAddress();
            env.put(WorkerEnvironment.PEERS, address.getHostAddress() + ":40001,198.51.100.1:40002");
            assertEquals(1408, AeronTransportContext.fromEnvironment(env).mtu(), "Aeron's default off loopback");
            env.put(AeronTransportContext.ENV_MTU, "link");
            int expected = AeronTransportContext.Builder.udpMtu(
                    java.net.NetworkInterface.getByInetAddress(address).getMTU(), false);
            assertEquals(expected, AeronTransportContext.fromEnvironment(env).mtu(), "the link of " + address);
        }
        env.put(WorkerEnvironment.PEERS, "127.0.0.1:40001,198.51.100.1:40002");
        env.put(AeronTransportContext.ENV_MTU, "link");
        assertEquals(1408, AeronTransportContext.fromEnvironment(env).mtu(), "loopback says nothing of the link out");
        env.put(AeronTransportContext.ENV_MTU, "8960");
        assertEquals(8960, AeronTransportContext.fromEnvironment(env).mtu());
        env.put(AeronTransportContext.ENV_MTU, "9000");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> AeronTransportContext.fromEnvironment(env));
        assertEquals("AeronTransportContext: mtu is 9000; it must be a multiple of 32 from 1408 to 65504",
                e.getMessage());
        for (String bad : new String[] {"jumbo", "0"}) {
            env.put(AeronTransportContext.ENV_MTU, bad);
            e = assertThrows(IllegalArgumentException.class, () -> AeronTransportContext.fromEnvironment(env));
            assertEquals("ATTN4J_TRANSPORT_MTU: expected a number of bytes or 'link', got '" + bad + "'",
                    e.getMessage());
        }
    }

    @Test
    @Timeout(10)
    void readsTheLaunchersEnvironment() {
        Map<String, String> env = new HashMap<>();
        env.put(WorkerEnvironment.RANK, "2");
        env.put(WorkerEnvironment.WORLD_SIZE, "3");
        env.put(WorkerEnvironment.PEERS, String.join(",", ENDPOINTS));
        env.put(WorkerEnvironment.JOB_TOKEN, "secret-token-of-the-test-job");
        env.put(WorkerEnvironment.TIMEOUT_MS, "2500");
        env.put(WorkerEnvironment.BIND, "0.0.0.0");
        AeronTransportContext c = AeronTransportContext.fromEnvironment(env);
        assertEquals(2, c.rank());
        assertEquals(3, c.worldSize());
        assertEquals(ENDPOINTS, c.endpoints());
        assertEquals(40003, c.port(2));
        assertEquals("127.0.0.1", c.host(2));
        assertEquals(Duration.ofMillis(2500), c.timeout());
        assertEquals(Duration.ofMillis(625), c.heartbeatInterval());
        assertEquals("0.0.0.0", c.bindAddress());
        assertEquals(65504, c.mtu(), "loopback endpoints get the large MTU");
        assertTrue(c.embeddedDriver());
        assertFalse(c.toString().contains("secret"), "the token leaked into toString");

        env.remove(WorkerEnvironment.BIND);
        env.remove(WorkerEnvironment.TIMEOUT_MS);
        AeronTransportContext d = AeronTransportContext.fromEnvironment(env);
        assertEquals("127.0.0.1", d.bindAddress(), "binds to loopback unless told otherwise");
        assertEquals(Duration.ofSeconds(60), d.timeout());

        env.put(WorkerEnvironment.WORLD_SIZE, "4");
        assertMessage("expected 4 host:port entries, one per rank", () -> AeronTransportContext.fromEnvironment(env));
        env.remove(WorkerEnvironment.JOB_TOKEN);
        assertMessage(WorkerEnvironment.JOB_TOKEN, () -> AeronTransportContext.fromEnvironment(env));
    }

    @Test
    @Timeout(10)
    void rejectsInvalidSettingsNamingTheValue() {
        AeronTransportContext.Builder b = AeronTransportContext.builder().endpoints(ENDPOINTS).jobToken(TOKEN);
        assertMessage("rank 3 is outside [0, 3)", () -> b.rank(3).build());
        b.rank(0);
        assertMessage("job token has 0 characters", () -> AeronTransportContext.builder().rank(0)
                .endpoints(ENDPOINTS).jobToken(" ").build());
        assertMessage("job token has 5 characters; every rank of a job needs the same token of at least 16",
                () -> AeronTransportContext.builder().rank(0).endpoints(ENDPOINTS).jobToken("short").build());
        assertMessage("endpoint 'nohost' is not host:port", () -> AeronTransportContext.builder().rank(0)
                .endpoints(List.of("nohost")).jobToken(TOKEN).build());
        assertMessage("repeat an endpoint", () -> AeronTransportContext.builder().rank(0)
                .endpoints(List.of("127.0.0.1:1", "127.0.0.1:1")).jobToken(TOKEN).build());
        assertMessage("max chunk bytes is 4194304", () -> b.maxChunkBytes(4 << 20).build());
        b.maxChunkBytes(1 << 20);
        assertMessage("term length is 1000", () -> b.termLength(1000).build());
        b.termLength(16 << 20);
        assertMessage("heartbeat interval is 40000 ms", () -> b.heartbeatInterval(Duration.ofSeconds(40)).build());
        b.heartbeatInterval(null);
        assertMessage("late receive wait is PT-0.001S; it must be zero or positive and shorter than the timeout",
                () -> b.lateReceiveWait(Duration.ofMillis(-1)).build());
        assertMessage("late receive wait is PT1M; it must be zero or positive and shorter than the timeout (PT1M)",
                () -> b.lateReceiveWait(Duration.ofMinutes(1)).build());
        b.lateReceiveWait(Duration.ZERO);
        assertEquals(Duration.ZERO, b.build().lateReceiveWait());
        assertEquals(1408, AeronTransportContext.builder().rank(0).endpoints(List.of("10.0.0.1:1", "10.0.0.2:1"))
                .jobToken(TOKEN).build().mtu(), "hosts beyond loopback get Aeron's default MTU");
    }

    @Test
    @Timeout(10)
    void writesAndReadsTheHeaderAsDrawn() {
        UnsafeBuffer b = new UnsafeBuffer(new byte[MessageDescriptor.MAX_HEADER_LENGTH]);
        long[] shape = {2, 0, 7};
        int length = MessageDescriptor.writeHeader(b, 0x1122334455667788L, MessageDescriptor.DATA, 3, 42,
                MessageDescriptor.dtypeCode(DataType.DOUBLE), shape, 9, 1, 4, 1 << 20, 1 << 18, 1 << 18);
        assertEquals(64 + 3 * 8, length);
        assertEquals(0x1122334455667788L, MessageDescriptor.jobId(b));
        assertEquals(0x88, b.getByte(0) & 0xFF, "little-endian job id");
        assertEquals(MessageDescriptor.DATA, MessageDescriptor.type(b));
        assertEquals(DataType.DOUBLE, MessageDescriptor.dataType(MessageDescriptor.dtype(b)));
        assertEquals(3, MessageDescriptor.arrayRank(b, 0));
        assertEquals(3, MessageDescriptor.sourceRank(b));
        assertEquals(42, MessageDescriptor.tag(b));
        assertEquals(1, MessageDescriptor.chunkIndex(b));
        assertEquals(4, MessageDescriptor.chunkCount(b));
        assertEquals(1 << 18, MessageDescriptor.chunkLength(b));
        assertEquals(9, MessageDescriptor.sequence(b));
        assertEquals(1 << 20, MessageDescriptor.payloadLength(b));
        assertEquals(1 << 18, MessageDescriptor.chunkOffset(b));
        assertArrayEquals(shape, MessageDescriptor.shape(b, 3));
        assertNull(MessageDescriptor.dataType((byte) 0));
    }

    private static void assertMessage(String expected, org.junit.jupiter.api.function.Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(expected), "message was: " + e.getMessage());
    }

    private static File shmRoot() {
        File shm = new File("/dev/shm");
        return shm.isDirectory() ? shm : new File(System.getProperty("java.io.tmpdir"));
    }

    private static File[] driverDirectories(String prefix) {
        File[] found = shmRoot().listFiles((d, name) -> name.startsWith(prefix));
        return found == null ? new File[0] : found;
    }

    private static List<String> freeEndpoints() {
        return Ranks.freeLoopbackEndpoints(2);
    }
}
