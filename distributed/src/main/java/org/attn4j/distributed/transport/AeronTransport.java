package org.attn4j.distributed.transport;

import java.io.File;
import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.StandardOpenOption;
import java.nio.channels.DatagramChannel;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.aeron.Aeron;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.driver.status.SenderPos;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentInvoker;
import org.agrona.concurrent.CompositeAgent;
import io.aeron.exceptions.DriverTimeoutException;
import org.agrona.CloseHelper;
import org.agrona.IoUtil;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.status.CountersReader;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link Transport} over Aeron, between processes on one host or many: Aeron IPC (shared-memory logs) to the
 * ranks on this rank's host, through one media driver per job and host ({@link HostDriver}: the first rank
 * there launches it, on its own thread, in a directory under {@code /dev/shm} named after the job and host), and
 * UDP unicast to the others. Each rank subscribes on its own UDP endpoint (and its IPC stream) and keeps one
 * exclusive publication to every other rank. One progress thread runs the Aeron client's conductor, the
 * {@link SenderAgent} (offers), the {@link ReceiverAgent} (polls) and, for a rank alone on its host, its own
 * embedded driver in invoker mode, in one duty cycle ({@link ProgressIdleStrategy}); a send on an idle link is
 * offered on the caller's thread. With {@link AeronTransportContext#aeronDirectory()} set it uses that external
 * driver instead. An array of {@link AeronTransportContext#SINGLE_COPY_MIN_BYTES} or more to a same-host peer goes
 * by single copy where the kernel allows ({@link AeronTransportContext#singleCopy()}): the log carries its address,
 * the peer copies it from this process ({@link ProcessMemory}) and releases it, and the send completes then.
 *
 * <p>Wire format: {@link MessageDescriptor}. A connection delivers data only after a HELLO carrying the job
 * token's digest; anything from another job, an unknown rank or a connection without HELLO is dropped and
 * counted ({@link #droppedMessages()}). Data leaves for a peer only once that peer acknowledged this transport's
 * HELLO, so transports opened one after another on the same endpoints lose nothing to each other. Every chunk
 * over UDP carries a CRC32C of header and payload (over IPC of the header, and of the payload too with
 * {@link AeronTransportContext#ipcChecksums()}); a damaged message fails the receive that would have returned it
 * ({@link CorruptMessageException}).
 *
 * <p>Failure detection: a peer that says goodbye (closes), whose connection goes away (Aeron's image
 * unavailable), that stays silent (no message or heartbeat) for the timeout, or to which queued data makes no
 * progress for the timeout, is failed: every call waiting on it fails with {@link PeerFailedException}, and
 * later calls on it fail at once. A peer is not readmitted after failing.
 *
 * <p>The Agrona library inside Aeron needs {@code --add-exports java.base/jdk.internal.misc=ALL-UNNAMED} (and
 * usually {@code --add-opens java.base/sun.nio.ch=ALL-UNNAMED}) on Java 17.
 */
public final class AeronTransport implements Transport {

    private static final Logger LOG = LoggerFactory.getLogger(AeronTransport.class);
    private static final AtomicInteger INSTANCES = new AtomicInteger();
    /** Embedded driver directories: attn4j-JOB-rankR-PID-N; group 1 is the owning process. */
    private static final Pattern STALE_CANDIDATE = Pattern.compile("attn4j-[0-9a-f]{16}-rank\\d+-(\\d+)-\\d+");

    private final AeronTransportContext context;
    private final JobToken token;
    private final Mailbox mailbox;
    private final TrafficCounter traffic = new TrafficCounter();
    private final AtomicReferenceArray<String> peerFailures;
    private final AtomicBoolean closed = new AtomicBoolean();
    /** Drawn at start; tells this transport's HELLOs from those of earlier ones on the same endpoint. */
    private final long incarnation = newIncarnation();
    /**
     * This transport's incarnation in memory of its own, whose address its HELLOs carry: a same-host peer that
     * reads it back ({@link ProcessMemory}) can take single-copy messages from this process.
     */
    private final ByteBuffer probe = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder()).putLong(0, incarnation);
    /** This rank's own driver (alone on its host), run by the progress thread; null otherwise. */
    private MediaDriver driver;
    private String driverDirectory;
    /** The job's driver on this host when other ranks share it; null otherwise. */
    private HostDriver hostDriver;
    private FileChannel rankLockChannel;
    private FileLock rankLock;
    private File rankLockFile;
    private Aeron aeron;
    private Outbound[] links;
    /** The TCP links' receiving ends; null when no peer is reached over TCP. */
    private TcpInbound tcpInbound;
    private SenderAgent sender;
    private ReceiverAgent receiver;
    private ProgressIdleStrategy idle;
    private AgentRunner progressRunner;

    /**
     * Starts the transport: the embedded driver (unless an external one is configured), the subscription on this
     * rank's endpoint, a publication to every other rank, and the progress thread. Does not wait for
     * peers: sends wait for their peer's connection, up to the timeout.
     *
     * @throws TransportException if Aeron cannot start, e.g. the endpoint's port is taken or no driver runs in
     *                            the configured directory
     */
    public AeronTransport(AeronTransportContext context) {
        this.context = context;
        this.token = new JobToken(context.jobToken());
        // A receive waits one heartbeat longer than the timeout: a peer is declared dead after the timeout of
        // silence (checked every half heartbeat), so when the receive was posted as another peer died, that
        // peer's death (which every call then names) comes first, not a timeout on a live peer that waited for it.
        // A receive about to time out applies the silence rule to its peer first (checkSilence): a peer that fell
        // silent is named as failed even when the receiving thread has not looked yet.
        this.mailbox = new Mailbox(context.rank(), context.worldSize(),
                context.timeout().plus(context.heartbeatInterval()), this::checkSilence);
        this.peerFailures = new AtomicReferenceArray<>(context.worldSize());
        try {
            start();
        } catch (RuntimeException e) {
            releaseAeron();
            if (driver == null && driverDirectory != null) {
                // The driver failed while starting and cannot delete what it created.
                IoUtil.delete(new File(driverDirectory), true);
            }
            throw new TransportException("rank " + context.rank() + ": could not start the Aeron transport ("
                    + context + "): " + e.getMessage(), e);
        }
        LOG.info("rank {}: Aeron transport up, job {}, {}", context.rank(), token, context);
    }

    /**
     * A transport configured from the environment the launcher sets ({@link AeronTransportContext#ENV_RANK} and
     * the other {@code ATTN4J_*} variables).
     *
     * @throws IllegalArgumentException naming a missing or malformed variable
     */
    public static AeronTransport fromEnvironment() {
        return new AeronTransport(AeronTransportContext.fromEnvironment(System.getenv()));
    }

    private void start() {
        long maxParkNs = context.idleMaxPark().toNanos();
        String directory = context.aeronDirectory();
        AgentInvoker driverInvoker = null;
        boolean sharedHost = context.embeddedDriver() && context.sameHostIpc() && context.localRanks() > 1;
        if (sharedHost) {
            // One driver for every rank of the job on this host, on its own thread: same-host peers exchange
            // messages through its IPC logs, which must keep moving while any of them is busy computing.
            File root = driverRoot();
            HostDriver.removeStale(root, DRIVER_TIMEOUT_MS);
            hostDriver = HostDriver.acquire(new File(root, "attn4j-" + token + "-host" + hostKey()).getAbsolutePath(),
                    () -> driverContext(ThreadingMode.SHARED, maxParkNs), DRIVER_TIMEOUT_MS);
            directory = hostDriver.directory();
            claimRank(directory);
        } else if (context.embeddedDriver()) {
            // This rank alone on its host: the driver's duty cycle runs on the transport's progress thread.
            directory = embeddedDriverDirectory();
            driverDirectory = directory;
            driver = MediaDriver.launch(driverContext(ThreadingMode.INVOKER, maxParkNs).aeronDirectoryName(directory)
                    .dirDeleteOnStart(true).dirDeleteOnShutdown(true));
            driverInvoker = driver.sharedAgentInvoker();
        }
        aeron = Aeron.connect(new Aeron.Context()
                .aeronDirectoryName(directory)
                .clientName("attn4j-rank" + context.rank())
                .useConductorAgentInvoker(true)
                .driverAgentInvoker(driverInvoker)
                .driverTimeoutMs(DRIVER_TIMEOUT_MS)
                .errorHandler(this::onAeronError));
        Subscription udp = aeron.addSubscription("aeron:udp?endpoint=" + hostLiteral(context.bindAddress()) + ":"
                + context.port(context.rank()), context.streamId(), this::onAvailableImage, this::onUnavailableImage);
        Subscription ipc = null;
        links = new Outbound[context.worldSize()];
        int tcpPeers = 0;
        int maxRecord = context.maxChunkBytes() + MessageDescriptor.MAX_HEADER_LENGTH;
        for (int p = 0; p < context.worldSize(); p++) {
            if (context.tcpPeer(p)) {
                links[p] = new TcpOutbound(context.host(p), context.port(p), maxRecord,
                        "from rank " + context.rank() + " to rank " + p + " (" + context.endpoints().get(p) + ")");
                tcpPeers++;
            } else if (context.ipcPeer(p)) {
                ipc = ipc != null ? ipc : aeron.addSubscription("aeron:ipc", ipcStream(context.rank()),
                        this::onAvailableImage, this::onUnavailableImage);
                // Non-sparse: the driver writes the whole log once, so no transfer waits on page faults. The
                // largest MTU: a chunk is cut into frames of this size, each handled on its own by the receiver.
                links[p] = Outbound.of(aeron.addExclusivePublication("aeron:ipc?term-length="
                        + context.ipcTermLength() + "|mtu=" + IPC_MTU + "|sparse=false", ipcStream(p)), this);
            } else if (p != context.rank()) {
                links[p] = Outbound.of(aeron.addExclusivePublication("aeron:udp?endpoint="
                        + context.endpoints().get(p) + "|mtu=" + context.mtu() + "|term-length=" + context.termLength()
                        + "|sparse=true", context.streamId()), this);
            }
        }
        if (tcpPeers > 0) {
            tcpInbound = new TcpInbound(context.bindAddress(), context.port(context.rank()), tcpPeers, maxRecord);
        }
        boolean singleCopy = ipc != null && context.singleCopy();
        if (singleCopy) {
            ProcessMemory.allowReaders();
        }
        sender = new SenderAgent(this, context, token, incarnation, singleCopy ? ProcessMemory.address(probe) : 0,
                links);
        receiver = new ReceiverAgent(this, context, token, udp, ipc, tcpInbound, mailbox);
        List<Agent> agents = new ArrayList<>();
        if (driverInvoker != null) {
            agents.add(new InvokerAgent(driverInvoker, "attn4j-driver"));
        }
        agents.add(new InvokerAgent(aeron.conductorAgentInvoker(), "attn4j-client"));
        agents.add(sender);
        agents.add(receiver);
        idle = new ProgressIdleStrategy(context.progressIdle(), () -> sender.outstanding() || mailbox.hasWaiting(),
                maxParkNs);
        progressRunner = new AgentRunner(idle, this::onAgentError, null, new CompositeAgent(agents));
        AgentRunner.startOnThread(progressRunner, TransportThreads.daemon("attn4j-progress"));
    }

    /**
     * Holds a lock on this rank's file beside the host driver's directory while the transport is open: a second
     * transport for the same rank of the job on this host would share the first's endpoint inside the one
     * driver and take half its messages, so it is refused.
     */
    private void claimRank(String directory) {
        File file = new File(directory + ".rank" + context.rank() + ".lock");
        try {
            rankLockChannel = FileChannel.open(file.toPath(), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
            try {
                rankLock = rankLockChannel.tryLock();
            } catch (OverlappingFileLockException e) {
                rankLock = null;
            }
        } catch (IOException e) {
            throw new TransportException("rank " + context.rank() + ": could not lock " + file + ": " + e, e);
        }
        if (rankLock == null) {
            CloseHelper.quietClose(rankLockChannel);
            rankLockChannel = null;
            throw new TransportException("rank " + context.rank() + " of this job already runs on this host (endpoint "
                    + context.endpoints().get(context.rank()) + ")");
        }
        rankLockFile = file;
    }

    /** How long a process that runs its host's driver waits at exit for the other ranks there to leave. */
    private static final Duration HOST_DRIVER_EXIT_WAIT = Duration.ofSeconds(2);

    /** The MTU of IPC publications: Aeron's largest. */
    private static final int IPC_MTU = 65504;

    /** How long Aeron clients wait for a silent driver, and how old a driver's heartbeat may be to count as live. */
    private static final long DRIVER_TIMEOUT_MS = 10_000;

    /**
     * How old another process's driver heartbeat may be when a stalled send asks whether the driver lives. Aeron's
     * driver writes that heartbeat once per timer interval (1 s by default), so a threshold of one interval called
     * a live driver lost whenever a check fell just before the next write.
     */
    private static final long DRIVER_LIVENESS_MS = 3_000;

    /** The IPC stream on which {@code rank} receives. */
    private int ipcStream(int rank) {
        return context.streamId() + 1 + rank;
    }

    /** Eight hex digits naming this host's address among the job's (all loopback addresses are one host). */
    private String hostKey() {
        String host = context.host(context.rank());
        String key = AeronTransportContext.Builder.isLoopback(host) ? "loopback" : host.toLowerCase(Locale.ROOT);
        return String.format("%08x", key.hashCode());
    }

    private MediaDriver.Context driverContext(ThreadingMode mode, long maxParkNs) {
        MediaDriver.Context c = new MediaDriver.Context()
                .threadingMode(mode)
                .termBufferSparseFile(true)
                .socketRcvbufLength(context.socketBufferBytes())
                .socketSndbufLength(context.socketBufferBytes())
                .initialWindowLength(receiverWindow())
                .mtuLength(context.mtu())
                .printConfigurationOnStart(false)
                .warnIfDirectoryExists(false)
                .errorHandler(e -> LOG.warn("rank {}: media driver error", context.rank(), e));
        if (mode == ThreadingMode.SHARED) {
            // Daemon: a host driver outlives its launching transport while other ranks use it, and must not keep
            // the JVM from exiting (a shutdown hook closes it).
            c.sharedIdleStrategy(AdaptiveIdleStrategy.forDriver(maxParkNs))
                    .sharedThreadFactory(TransportThreads.daemon("attn4j-host-driver"));
        }
        return c;
    }

    /** Runs an Aeron agent invoker (the driver's or the client conductor's) as one agent of the progress thread. */
    private record InvokerAgent(AgentInvoker invoker, String roleName) implements Agent {
        @Override
        public int doWork() {
            return invoker.invoke();
        }
    }

    /**
     * The configured receiver window, lowered when the kernel grants a smaller receive buffer than configured
     * ({@code net.core.rmem_max} is 208 KiB on many hosts): a window larger than the socket buffer lets a burst
     * overflow it, and every lost datagram costs a retransmission.
     */
    private int receiverWindow() {
        int wanted = context.socketBufferBytes();
        if (wanted == 0) {
            return context.receiverWindowBytes();
        }
        int granted;
        try (DatagramChannel probe = DatagramChannel.open()) {
            probe.setOption(StandardSocketOptions.SO_RCVBUF, wanted);
            granted = probe.getOption(StandardSocketOptions.SO_RCVBUF);
        } catch (IOException e) {
            return context.receiverWindowBytes();
        }
        // Linux reports twice the size it granted (the kernel's bookkeeping share); a cap shows as less than asked.
        if (granted >= wanted) {
            return context.receiverWindowBytes();
        }
        int window = Math.max(context.mtu(), Math.min(context.receiverWindowBytes(), granted / 2) & ~31);
        LOG.warn("rank {}: the kernel grants a UDP receive buffer of {} bytes, not the {} asked for; receiver window"
                + " lowered to {} bytes. Raise net.core.rmem_max and net.core.wmem_max for throughput.",
                context.rank(), granted, wanted, window);
        return window;
    }

    private static File driverRoot() {
        File shm = new File("/dev/shm");
        return shm.isDirectory() && shm.canWrite() ? shm : new File(System.getProperty("java.io.tmpdir"));
    }

    private String embeddedDriverDirectory() {
        File root = driverRoot();
        removeStaleDriverDirectories(root);
        // Unique per process and instance too: dirDeleteOnStart would wipe a live driver's directory otherwise.
        return new File(root, "attn4j-" + token + "-rank" + context.rank() + "-" + ProcessHandle.current().pid() + "-"
                + INSTANCES.incrementAndGet()).getAbsolutePath();
    }

    /**
     * Deletes the driver directories of attn4j processes that no longer run: a killed worker cannot delete its
     * own, and each holds the term buffers it had touched.
     */
    private static void removeStaleDriverDirectories(File root) {
        File[] dirs = root.listFiles((d, name) -> STALE_CANDIDATE.matcher(name).matches());
        if (dirs == null) {
            return;
        }
        for (File dir : dirs) {
            Matcher m = STALE_CANDIDATE.matcher(dir.getName());
            if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).isEmpty()) {
                LOG.info("removing the driver directory {} of a process that no longer runs", dir);
                IoUtil.delete(dir, true);
            }
        }
    }

    private static String hostLiteral(String address) {
        return address.contains(":") && !address.startsWith("[") ? "[" + address + "]" : address;
    }

    @Override
    public int rank() {
        return context.rank();
    }

    @Override
    public int worldSize() {
        return context.worldSize();
    }

    @Override
    public CompletableFuture<Void> send(int peer, int tag, INDArray array) {
        return send(peer, tag, array, TransportThreads.completer());
    }

    @Override
    public CompletableFuture<Void> send(int peer, int tag, INDArray array, Executor completion) {
        Objects.requireNonNull(completion, "completion");
        checkPeerAndTag("send", peer, tag);
        ArrayBytes.checkSendable("AeronTransport.send", array, context.maxMessageBytes());
        if (closed.get()) {
            return CompletableFuture.failedFuture(new TransportClosedException("rank " + rank() + ": send to rank "
                    + peer + " with tag " + tag + " after close"));
        }
        String failure = peerFailures.get(peer);
        if (failure != null) {
            return CompletableFuture.failedFuture(new PeerFailedException(rank(), peer, tag, failure));
        }
        if (peer == rank()) {
            mailbox.deliver(peer, tag, ArrayBytes.detachedCopy(array));
            return CompletableFuture.completedFuture(null);
        }
        traffic.record(peer, tag, ArrayBytes.byteLength(array));
        INDArray source = ArrayBytes.contiguous(array);
        SenderAgent.Outgoing m = new SenderAgent.Outgoing(peer, tag, source, ArrayBytes.bytes(source),
                MessageDescriptor.dtypeCode(source.dataType()), source.shape(), completion);
        if (sender.trySendInline(m)) {
            // Copied into the log on this thread, beside the progress thread's work (or queued part way).
            if (!m.future.isDone()) {
                wakeProgress();
            }
            return m.future;
        }
        sender.enqueue(m);
        if (closed.get()) {
            // Close may have drained the queue before this send reached it.
            sender.failUnsent("closed");
        } else {
            wakeProgress();
        }
        return m.future;
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag) {
        checkPeerAndTag("receive", peer, tag);
        return post(mailbox.receive(peer, tag));
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag, INDArray into) {
        checkPeerAndTag("receive", peer, tag);
        if (into == null) {
            throw new IllegalArgumentException("AeronTransport.receive: the array to receive into is null");
        }
        return post(mailbox.receive(peer, tag, into, TransportThreads.completer()));
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag, INDArray into, Executor completion) {
        checkPeerAndTag("receive", peer, tag);
        return post(mailbox.receive(peer, tag, into, Objects.requireNonNull(completion, "completion")));
    }

    /**
     * As {@link Transport#receiveSum}: a FLOAT or DOUBLE message is added to {@code addend} as the receiver reads
     * it out of the log (or the socket's bytes), straight into {@code into}.
     */
    @Override
    public CompletableFuture<INDArray> receiveSum(int peer, int tag, INDArray into, INDArray addend,
                                                  Executor completion) {
        checkPeerAndTag("receive", peer, tag);
        Mailbox.checkAddend(into, addend);
        return post(mailbox.receive(peer, tag, into, addend, Objects.requireNonNull(completion, "completion")));
    }

    /** A receive still waiting wakes the progress thread, which then polls closely for its message. */
    private CompletableFuture<INDArray> post(CompletableFuture<INDArray> f) {
        if (!f.isDone()) {
            wakeProgress();
        }
        return f;
    }

    @Override
    public TrafficCounter traffic() {
        return traffic;
    }

    @Override
    public Duration timeout() {
        return context.timeout();
    }

    /** The configuration this transport runs with. */
    public AeronTransportContext context() {
        return context;
    }

    /** Messages dropped because they came from another job, an unknown rank, or a connection without HELLO. */
    public long droppedMessages() {
        return receiver.droppedMessages();
    }

    /** Messages that arrived damaged and were not delivered (each failed its receive). */
    public long corruptMessages() {
        return receiver.corruptMessages();
    }

    /** Messages written straight from the transport's log into the array a receive gave (no array allocated). */
    public long directReceives() {
        return receiver.directMessages();
    }

    /** DATA offers that Aeron refused with BACK_PRESSURED and the sender retried. */
    public long backPressuredOffers() {
        return sender.backPressuredOffers();
    }

    /** DATA offers that Aeron refused and the sender retried (back pressure, admin action, not yet connected). */
    public long refusedOffers() {
        return sender.refusedOffers();
    }

    /**
     * Tells connected peers goodbye (waiting at most min(timeout, 1 s) for the goodbyes to leave), fails waiting
     * calls with {@link TransportClosedException}, stops the threads, closes Aeron and the embedded driver
     * (deleting its directory). Idempotent.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            Duration wait = Duration.ofMillis(Math.min(context.timeout().toMillis(), 1000) + 100);
            idle.kick();
            sender.goodbye(progressRunner.thread(), wait);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        shutDown("closed");
        LOG.info("rank {}: Aeron transport closed", rank());
    }

    /** Stops everything without telling the peers, as a crash would (test hook). */
    void kill() {
        if (closed.compareAndSet(false, true)) {
            shutDown("killed");
        }
    }

    /** Damages one payload byte of the next chunk sent to {@code peer} after its checksum is taken (test hook). */
    void corruptNextChunk(int peer) {
        sender.corruptNextChunk(peer);
    }

    /** Sends data after the HELLO without waiting for the peer's acknowledgement, as a rogue sender would (test hook). */
    void ignoreAcknowledgements() {
        sender.ignoreAcknowledgements = true;
    }

    /** Sends and receives nothing for {@code d}, heartbeats included, as a hung process would (test hook). */
    void silence(Duration d) {
        long until = System.nanoTime() + d.toNanos();
        sender.silenceUntil(until);
        receiver.stallUntil(until);
    }

    /** Stops the receiver's polling for {@code d}, so senders meet back pressure (test hook). */
    void stallReceiver(Duration d) {
        receiver.stallUntil(System.nanoTime() + d.toNanos());
    }

    private void shutDown(String reason) {
        wakeProgress();
        CloseHelper.quietClose(progressRunner);
        sender.failUnsent(reason);
        mailbox.close(reason);
        releaseAeron();
    }

    private void releaseAeron() {
        if (links != null) {
            for (Outbound link : links) {
                if (link instanceof TcpOutbound t) {
                    t.close();
                }
            }
        }
        CloseHelper.quietClose(tcpInbound);
        CloseHelper.quietClose(aeron);
        CloseHelper.quietClose(driver);
        if (rankLock != null) {
            IoUtil.delete(rankLockFile, true);
            CloseHelper.quietClose(rankLock::release);
            CloseHelper.quietClose(rankLockChannel);
            rankLock = null;
        }
        if (hostDriver != null) {
            hostDriver.release(HOST_DRIVER_EXIT_WAIT);
            hostDriver = null;
        }
    }

    private static long newIncarnation() {
        long n;
        do {
            n = new SecureRandom().nextLong();
        } while (n == 0);
        return n;
    }

    /** A valid HELLO came from {@code peer} (see {@link SenderAgent#helloFrom}); progress thread. */
    void helloFrom(int peer, long peerIncarnation, long acknowledges, boolean wantsAck, boolean readsUs) {
        sender.helloFrom(peer, peerIncarnation, acknowledges, wantsAck, readsUs);
        wakeProgress();
    }

    /** Whether this process can read {@code peer}'s memory (its HELLOs say so); progress thread. */
    boolean readsPeer(int peer) {
        return receiver.readsPeer(peer);
    }

    /** {@code peer} released this rank's single-copy messages up to {@code sequence}; progress thread. */
    void releasedBy(int peer, long sequence) {
        sender.releasedBy(peer, sequence);
    }

    /** This rank read {@code peer}'s single-copy message {@code sequence}: the peer may reuse it. Progress thread. */
    void release(int peer, long sequence) {
        sender.release(peer, sequence);
    }

    /** Messages sent to same-host peers by single copy (the receiver read them from this process's memory). */
    public long singleCopyMessages() {
        return sender == null ? 0 : sender.singleCopyMessages();
    }

    /** Why {@code peer} failed, or null while it is alive; any thread. */
    String peerFailure(int peer) {
        return peerFailures.get(peer);
    }

    /** Fails {@code peer} for good: its waiting and later calls fail; the first reason sticks. Any thread. */
    void failPeer(int peer, String reason) {
        if (markFailed(peer, reason) && !closed.get()) {
            LOG.warn("rank {}: peer rank {} failed: {}", rank(), peer, reason);
        }
    }

    /** {@code peer} said goodbye: as {@link #failPeer}, but an orderly departure, logged as such. */
    void peerLeft(int peer) {
        if (markFailed(peer, PeerFailedException.closedReason(peer))) {
            LOG.debug("rank {}: peer rank {} closed its transport", rank(), peer);
        }
    }

    private boolean markFailed(int peer, String reason) {
        if (!peerFailures.compareAndSet(peer, null, reason)) {
            return false;
        }
        mailbox.failPeer(peer, reason);
        wakeProgress();
        return true;
    }

    /** Wakes the progress thread and keeps it polling closely for a while: a call is waiting on it. */
    private void wakeProgress() {
        ProgressIdleStrategy i = idle;
        if (i != null) {
            i.kick();
        }
        Thread t = progressRunner == null ? null : progressRunner.thread();
        if (t != null) {
            LockSupport.unpark(t);
        }
    }

    /** The driver's sender position of {@code publication} (bytes handed to the socket), or MAX_VALUE if unknown. */
    long senderPosition(ExclusivePublication publication) {
        CountersReader counters = aeron.countersReader();
        int id = counters.findByTypeIdAndRegistrationId(SenderPos.SENDER_POSITION_TYPE_ID,
                publication.registrationId());
        return id == CountersReader.NULL_COUNTER_ID ? Long.MAX_VALUE : counters.getCounterValue(id);
    }

    private void onAvailableImage(Image image) {
        LOG.debug("rank {}: connection {} from {}", rank(), image.sessionId(), image.sourceIdentity());
    }

    private void onUnavailableImage(Image image) {
        Integer peer = receiver == null ? null : receiver.peerOfSession(image.sessionId());
        if (peer != null) {
            failPeer(peer, "its connection to rank " + rank() + " went away (Aeron image unavailable)");
        }
    }

    private void onAeronError(Throwable t) {
        if (t instanceof DriverTimeoutException && !closed.get()) {
            LOG.error("rank {}: lost the media driver; failing every peer", rank(), t);
            driverLost();
        } else if (!closed.get()) {
            LOG.warn("rank {}: Aeron error", rank(), t);
        }
    }

    /**
     * Whether this process runs the media driver its host's ranks share (the first rank of the job to start on
     * the host launches it). When this process ends, that driver ends with it, and with it every same-host rank's
     * IPC: those ranks fail as having lost their media driver.
     */
    public boolean hostsMediaDriver() {
        HostDriver d = hostDriver;
        return d != null && d.owned();
    }

    /**
     * Whether the media driver is alive. A stalled send over Aeron asks before blaming its peer: with the driver
     * gone (it lives in another rank's process when ranks share a host) no publication moves, whichever peer it
     * goes to. A driver in this process (this rank's own, or the host's when this rank started it) lives as long
     * as the transport. Another process's driver is alive when its heartbeat is at most
     * {@value #DRIVER_LIVENESS_MS} ms old. Any thread; maps the driver's control file, so only for such rare
     * checks.
     */
    boolean driverAlive() {
        if (driver != null || hostsMediaDriver()) {
            return true;
        }
        try {
            return aeron.context().isDriverActive(DRIVER_LIVENESS_MS, message -> { });
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** The directory of the media driver this transport uses (test hook). */
    String aeronDirectoryName() {
        return aeron.context().aeronDirectoryName();
    }

    /**
     * Fails {@code peer} now if it has been silent for the timeout, as the receiving thread would on its next
     * check (or this rank's driver, when that is what fell silent). Any thread.
     */
    void checkSilence(int peer) {
        ReceiverAgent r = receiver;
        if (r != null) {
            r.checkSilence(peer);
        }
    }

    /** Fails every peer: this rank lost its media driver. Any thread. */
    void driverLost() {
        for (int p = 0; p < worldSize(); p++) {
            if (p != rank()) {
                failPeer(p, PeerFailedException.driverLostReason(rank()));
            }
        }
    }

    private void onAgentError(Throwable t) {
        LOG.error("rank {}: transport thread error", rank(), t);
    }

    private void checkPeerAndTag(String call, int peer, int tag) {
        if (peer < 0 || peer >= worldSize()) {
            throw new IllegalArgumentException("AeronTransport." + call + ": peer " + peer + " is outside [0, "
                    + worldSize() + ")");
        }
        if (tag < 0) {
            throw new IllegalArgumentException("AeronTransport." + call + ": tag " + tag + " is negative");
        }
    }
}
