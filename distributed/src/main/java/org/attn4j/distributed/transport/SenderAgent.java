package org.attn4j.distributed.transport;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.zip.CRC32C;

import io.aeron.Publication;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.UnsafeBuffer;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The sending side of an {@link AeronTransport}, run by its progress thread: it offers what is queued, and a
 * caller may offer on an idle link itself ({@link #trySendInline}); a lock per link keeps one thread on a
 * publication at a time, and the order of the sends to a peer is kept. Per peer it waits for the connection, sends the HELLO (again every
 * {@value #HELLO_RETRY_MS} ms until the peer acknowledges it, see {@link MessageDescriptor}), then the queued
 * arrays chunk by chunk (a few chunks per peer per cycle, so one slow peer does not hold up the others), and a
 * heartbeat whenever the link has been quiet for a heartbeat interval. It answers every HELLO that asks for an
 * acknowledgement with one of its own.
 *
 * <p>Aeron's offer results: BACK_PRESSURED, ADMIN_ACTION and NOT_CONNECTED are retried through the runner's idle
 * strategy while the link makes progress; a link with queued data and no progress for the timeout fails its
 * peer. CLOSED and MAX_POSITION_EXCEEDED fail the link at once with a typed exception.
 */
final class SenderAgent implements Agent {

    /** Chunks offered per peer per duty cycle before the next peer's turn. */
    private static final int CHUNK_BUDGET = 4;
    /** How often an unacknowledged HELLO is sent again. */
    static final long HELLO_RETRY_MS = 100;
    /**
     * How long a broken TCP connection (the peer's process is gone or going) waits before it fails its peer: what
     * the peer sent before it went (a collective's failure notice naming the rank that really failed, its
     * goodbye) arrives on its own connection to this rank, and is read and acted on first.
     */
    private static final long BROKEN_LINK_GRACE_NS = TimeUnit.MILLISECONDS.toNanos(500);

    /** One array to send, and how far it got. */
    static final class Outgoing {
        final int peer;
        final int tag;
        /** Held so that ND4J does not free the memory {@link #bytes} points into before it is sent. */
        final INDArray array;
        final ByteBuffer bytes;
        final byte dtype;
        final long[] shape;
        final CompletableFuture<Void> future = new CompletableFuture<>();
        /** Where {@link #future} completes when the progress thread finishes or fails the send. */
        final Executor completion;
        long sequence = -1;
        /** Sent by single copy: the receiver reads the payload from this process and releases it. */
        boolean remote;
        /** When a single-copy send was offered, waiting for its release since. */
        long offeredNs;
        int chunkCount;
        int nextChunk;
        int headerLength;
        int chunkLength;
        boolean chunkReady;
        /** The link position after its last chunk, while the link may still read its payload. */
        long endPosition;

        Outgoing(int peer, int tag, INDArray array, ByteBuffer bytes, byte dtype, long[] shape,
                 Executor completion) {
            this.peer = peer;
            this.tag = tag;
            this.array = array;
            this.bytes = bytes;
            this.dtype = dtype;
            this.shape = shape;
            this.completion = completion;
        }
    }

    /** The sender-side state of the link to one peer; touched under its {@link PeerLink#lock}. */
    private final class PeerLink {
        final int peer;
        final Outbound publication;
        final ArrayDeque<Outgoing> queue = new ArrayDeque<>();
        /** Fully offered sends whose payload the link still reads ({@link Outbound#keepsPayload}), oldest first. */
        final ArrayDeque<Outgoing> unsent = new ArrayDeque<>();
        /** Sends by single copy whose payload the peer has not yet released, oldest first. */
        final ArrayDeque<Outgoing> unreleased = new ArrayDeque<>();
        /** The address a single-copy message carries. */
        final UnsafeBuffer remoteDescriptor = new UnsafeBuffer(new byte[MessageDescriptor.REMOTE_DESCRIPTOR_LENGTH]);
        /** The sequence number of the last RELEASE this rank sent the peer, -1 for none. */
        long releaseSent = -1;
        final UnsafeBuffer header = new UnsafeBuffer(new byte[MessageDescriptor.MAX_HEADER_LENGTH]);
        final UnsafeBuffer control = new UnsafeBuffer(new byte[MessageDescriptor.FIXED_HEADER_LENGTH
                + MessageDescriptor.HELLO_PAYLOAD_LENGTH]);
        final UnsafeBuffer payload = new UnsafeBuffer(new byte[0]);
        final int chunkBytes;
        /** Whether DATA carries a payload checksum: always over UDP, over IPC only when configured. */
        final boolean checksummed;
        /** Whether large arrays may go by single copy, once the peer says it can read this process. */
        final boolean singleCopy;
        boolean helloSent;
        long lastHelloNs;
        boolean goodbyeSent;
        long goodbyePosition;
        long lastSentNs;
        /** When the head of the queue last moved (or arrived at an idle link). */
        long waitingSinceNs;
        /** When a TCP connection broke (see {@link #BROKEN_LINK_GRACE_NS}); 0 while it is whole. */
        long brokenSinceNs;
        long nextSequence;
        volatile boolean corruptNextChunk;
        /**
         * Held by whoever offers to the publication: the progress thread servicing the link, or a caller sending
         * inline ({@link #trySendInline}).
         */
        final ReentrantLock lock = new ReentrantLock();
        /** Sends to this peer queued (in the inbox or the link's queue) and not yet fully offered or failed. */
        final AtomicInteger pending = new AtomicInteger();
        final CRC32C crc = new CRC32C();
        final byte[] crcScratch = new byte[MessageDescriptor.MAX_HEADER_LENGTH + MessageDescriptor.HELLO_PAYLOAD_LENGTH];

        PeerLink(int peer, Outbound publication) {
            this.peer = peer;
            this.publication = publication;
            this.checksummed = !context.ipcPeer(peer) || context.ipcChecksums();
            this.singleCopy = context.ipcPeer(peer) && context.singleCopy();
            this.chunkBytes = Math.min(context.maxChunkBytes(),
                    publication.maxMessageLength() - MessageDescriptor.MAX_HEADER_LENGTH);
        }
    }

    private final AeronTransport transport;
    private final AeronTransportContext context;
    private final long jobId;
    private final byte[] helloDigest;
    private final long incarnation;
    /** Per peer, set by the receiver: 1 once the peer acknowledged this transport's incarnation. */
    private final AtomicIntegerArray acknowledged;
    /** Per peer, set by the receiver thread: 1 while the peer waits for this transport's acknowledgement. */
    private final AtomicIntegerArray ackDue;
    /** Per peer, set by the receiver thread: the peer's incarnation, 0 until its HELLO came. */
    private final AtomicLongArray peerIncarnations;
    /** Per peer, set by the receiver thread: 1 once the peer said (acknowledging this incarnation) it reads us. */
    private final AtomicIntegerArray peerReadsUs;
    /** Per peer, set by the receiver thread: the sequence number of the peer's last RELEASE, -1 for none. */
    private final AtomicLongArray released;
    /** Per peer, set by the receiver thread: the sequence number this rank has to release to the peer, or -1. */
    private final AtomicLongArray releaseDue;
    private final long pid = ProcessMemory.pid();
    private final long probeAddress;
    private final long timeoutNs;
    private final long heartbeatNs;
    private final PeerLink[] links;
    private final Queue<Outgoing> inbox = new ConcurrentLinkedQueue<>();
    /** A message taken from the inbox whose link was busy; offered first on the next cycle. Progress thread only. */
    private Outgoing heldOver;
    private final CountDownLatch goodbyeDone = new CountDownLatch(1);
    /** Counted down once the progress thread has taken up the goodbye (or closed). */
    private final CountDownLatch goodbyeStarted = new CountDownLatch(1);
    private final AtomicLong refusedOffers = new AtomicLong();
    private final AtomicLong backPressured = new AtomicLong();
    private final AtomicLong singleCopies = new AtomicLong();
    private volatile boolean goodbyeRequested;
    private volatile long silentUntilNs;
    /** Test hook: send data after the HELLO without waiting for its acknowledgement, as a rogue sender would. */
    volatile boolean ignoreAcknowledgements;
    private long goodbyeDeadlineNs;
    private int cursor;

    /**
     * @param publications one link per rank, null at this rank's index
     */
    SenderAgent(AeronTransport transport, AeronTransportContext context, JobToken token, long incarnation,
                long probeAddress, Outbound[] publications) {
        this.probeAddress = probeAddress;
        this.transport = transport;
        this.context = context;
        this.jobId = token.jobId();
        this.helloDigest = token.helloDigest();
        this.incarnation = incarnation;
        this.acknowledged = new AtomicIntegerArray(publications.length);
        this.ackDue = new AtomicIntegerArray(publications.length);
        this.peerIncarnations = new AtomicLongArray(publications.length);
        this.peerReadsUs = new AtomicIntegerArray(publications.length);
        this.released = new AtomicLongArray(publications.length);
        this.releaseDue = new AtomicLongArray(publications.length);
        for (int p = 0; p < publications.length; p++) {
            released.set(p, -1);
            releaseDue.set(p, -1);
        }
        this.timeoutNs = context.timeout().toNanos();
        this.heartbeatNs = context.heartbeatInterval().toNanos();
        this.links = new PeerLink[publications.length];
        for (int p = 0; p < publications.length; p++) {
            links[p] = publications[p] == null ? null : new PeerLink(p, publications[p]);
        }
    }

    /**
     * Whether there is anything for the progress thread to do soon: data or a goodbye queued, a connection
     * waiting for its HELLO's acknowledgement, or an acknowledgement due. Progress thread only.
     */
    boolean outstanding() {
        if (goodbyeRequested || !inbox.isEmpty()) {
            return true;
        }
        for (PeerLink link : links) {
            if (link == null) {
                continue;
            }
            boolean connecting = acknowledged.get(link.peer) == 0 && transport.peerFailure(link.peer) == null;
            if (!link.queue.isEmpty() || connecting || ackDue.get(link.peer) == 1 || link.publication.hasBacklog()
                    || !link.unsent.isEmpty() || !link.unreleased.isEmpty()
                    || releaseDue.get(link.peer) != link.releaseSent) {
                return true;
            }
        }
        return false;
    }

    @Override
    public String roleName() {
        return "attn4j-sender-rank" + context.rank();
    }

    /**
     * A valid HELLO came from {@code peer}; receiver thread. The caller wakes the sender thread.
     *
     * @param peerIncarnation  the peer's incarnation
     * @param acknowledges     the incarnation the HELLO acknowledges
     * @param wantsAck         whether the peer waits for this transport's acknowledgement
     * @param readsUs          whether the peer can read this process's memory (single copy)
     */
    void helloFrom(int peer, long peerIncarnation, long acknowledges, boolean wantsAck, boolean readsUs) {
        peerIncarnations.set(peer, peerIncarnation);
        if (acknowledges == incarnation) {
            peerReadsUs.set(peer, readsUs ? 1 : 0);           // before the link comes up: set once it does
            acknowledged.set(peer, 1);
        }
        if (wantsAck) {
            ackDue.set(peer, 1);
        }
    }

    /** The peer released the payloads of its single-copy messages up to {@code sequence}; receiver thread. */
    void releasedBy(int peer, long sequence) {
        if (sequence > released.get(peer)) {
            released.set(peer, sequence);
        }
    }

    /** This rank read the payload of {@code peer}'s single-copy message {@code sequence}; receiver thread. */
    void release(int peer, long sequence) {
        releaseDue.set(peer, sequence);
    }

    /** Sends to a same-host peer that went by single copy. */
    long singleCopyMessages() {
        return singleCopies.get();
    }

    /** Queues a send; any thread. The caller wakes the progress thread. */
    void enqueue(Outgoing m) {
        links[m.peer].pending.incrementAndGet();
        inbox.add(m);
    }

    /**
     * Offers {@code m} on the caller's thread, so that its copy into the log runs beside the progress thread's
     * copies out of it: only when the link is up and nothing else to that peer is queued (the order of sends
     * stays), and no other thread is offering on it. A send refused part way (back pressure) is queued, at the
     * head, for the progress thread to finish. Any thread.
     *
     * @return whether {@code m} was taken (sent, queued part way, or failed); false: queue it as usual
     */
    boolean trySendInline(Outgoing m) {
        PeerLink link = links[m.peer];
        boolean up = acknowledged.get(m.peer) == 1 || ignoreAcknowledgements;
        if (link == null || !up || goodbyeRequested || System.nanoTime() - silentUntilNs < 0 || link.pending.get() != 0
                || transport.peerFailure(m.peer) != null || !link.lock.tryLock()) {
            return false;
        }
        try {
            if (!link.helloSent || link.pending.get() != 0) {
                return false;
            }
            prepare(link, m);
            long now = System.nanoTime();
            long position = 0;
            while (m.nextChunk < m.chunkCount) {
                long result = offerChunk(link, m);
                if (result > 0) {
                    m.nextChunk++;
                    position = result;
                    link.lastSentNs = now;
                } else if (retryable(result)) {
                    refusedOffers.incrementAndGet();
                    if (result == Publication.BACK_PRESSURED) {
                        backPressured.incrementAndGet();
                    }
                    link.pending.incrementAndGet();
                    link.waitingSinceNs = now;
                    link.queue.addFirst(m);
                    return true;
                } else {
                    link.pending.incrementAndGet();
                    link.queue.addFirst(m);
                    failLink(link, result, m.tag);
                    return true;
                }
            }
            if (!heldUntilSent(link, m, position)) {
                m.future.complete(null);               // on this thread: nothing can be attached yet
            }
            return true;
        } finally {
            link.lock.unlock();
        }
    }

    /** A send whose last chunk was offered at {@code position}: done now, or once the link has written it. */
    private static void offered(PeerLink link, Outgoing m, long position) {
        if (!heldUntilSent(link, m, position)) {
            TransportThreads.complete(m.completion, () -> m.future.complete(null));
        }
    }

    /**
     * Whether {@code m} waits in {@link PeerLink#unsent} because the link still reads its payload, or in
     * {@link PeerLink#unreleased} until the peer has read it.
     */
    private static boolean heldUntilSent(PeerLink link, Outgoing m, long position) {
        if (m.remote) {
            m.offeredNs = System.nanoTime();
            link.unreleased.add(m);
            return true;
        }
        if (link.publication.keepsPayload() && !link.publication.sent(position)) {
            m.endPosition = position;
            link.unsent.add(m);
            return true;
        }
        return false;
    }

    /**
     * Completes the sends whose payload the link has written since (or the peer released), or fails them all if
     * the link closed.
     */
    private void settle(PeerLink link) {
        long upTo = released.get(link.peer);
        while (!link.unreleased.isEmpty() && link.unreleased.peek().sequence <= upTo) {
            Outgoing m = link.unreleased.poll();
            TransportThreads.complete(m.completion, () -> m.future.complete(null));
        }
        if (link.unsent.isEmpty()) {
            return;
        }
        String closed = link.publication.closedReason();
        if (closed != null) {
            Outgoing m;
            while ((m = link.unsent.poll()) != null) {
                fail(m, new PeerFailedException(context.rank(), link.peer, m.tag, closed));
            }
            return;
        }
        while (!link.unsent.isEmpty() && link.publication.sent(link.unsent.peek().endPosition)) {
            Outgoing m = link.unsent.poll();
            TransportThreads.complete(m.completion, () -> m.future.complete(null));
        }
    }

    /** Numbers {@code m} and decides how it travels, as far as is known before the link is up ({@link #decide}). */
    private void prepare(PeerLink link, Outgoing m) {
        m.sequence = link.nextSequence++;
        decide(link, m);
    }

    /**
     * Decides how {@code m} travels, by single copy or in chunks through the link; again at its first offer, when
     * the link is up and the peer has said whether it can read this process.
     */
    private void decide(PeerLink link, Outgoing m) {
        m.remote = link.singleCopy && peerReadsUs.get(link.peer) == 1
                && m.bytes.remaining() >= AeronTransportContext.SINGLE_COPY_MIN_BYTES && m.bytes.isDirect();
        m.chunkCount = m.remote ? 1
                : Math.max(1, (int) ((m.bytes.remaining() + (long) link.chunkBytes - 1) / link.chunkBytes));
    }

    /** Fails queued sends that the progress thread will no longer see (it has stopped); any thread. */
    void failUnsent(String reason) {
        Outgoing m;
        while ((m = inbox.poll()) != null) {
            links[m.peer].pending.decrementAndGet();
            fail(m, closed(m, reason));
        }
    }

    /** DATA offers refused with BACK_PRESSURED (the receiver's window was full). */
    long backPressuredOffers() {
        return backPressured.get();
    }

    /** DATA offers refused with a retryable result (back pressure, admin action, not connected). */
    long refusedOffers() {
        return refusedOffers.get();
    }

    /** Makes the next DATA chunk to {@code peer} carry a wrong checksum (test hook). */
    void corruptNextChunk(int peer) {
        links[peer].corruptNextChunk = true;
    }

    /**
     * Asks the sender thread to fail what is queued, tell every connected peer goodbye, and wait until the
     * goodbyes have left (the driver's sender position passed them) and the peers released the single-copy arrays
     * they may still read; waits at most {@code wait} once the sender thread has taken the request up, and at most
     * the transport's timeout for that (a thread kept off the cores of a loaded machine).
     */
    void goodbye(Thread progressThread, Duration wait) throws InterruptedException {
        goodbyeRequested = true;
        LockSupport.unpark(progressThread);
        if (goodbyeStarted.await(timeoutNs, TimeUnit.NANOSECONDS)) {
            goodbyeDone.await(wait.toNanos(), TimeUnit.NANOSECONDS);
        }
    }

    /** Sends nothing, heartbeats included, until {@code untilNs} (test hook for a silent peer). */
    void silenceUntil(long untilNs) {
        silentUntilNs = untilNs;
    }

    @Override
    public int doWork() {
        long now = System.nanoTime();
        if (now - silentUntilNs < 0) {
            return 0;
        }
        if (goodbyeRequested) {
            return sayGoodbye(now);
        }
        int work = drainInbox(now);
        for (int i = 0; i < links.length; i++) {
            PeerLink link = links[(cursor + i) % links.length];
            if (link != null && link.lock.tryLock()) {             // else a caller is sending on it inline
                try {
                    work += service(link, now);
                } finally {
                    link.lock.unlock();
                }
            }
        }
        cursor = (cursor + 1) % links.length;
        return work;
    }

    @Override
    public void onClose() {
        failUnsent("closed");
        failHeldOver("closed");
        for (PeerLink link : links) {
            if (link != null) {
                link.lock.lock();
                try {
                    failQueue(link, m -> closed(m, "closed"));
                } finally {
                    link.lock.unlock();
                }
            }
        }
        goodbyeStarted.countDown();
        goodbyeDone.countDown();
    }

    private void failHeldOver(String reason) {
        if (heldOver != null) {
            links[heldOver.peer].pending.decrementAndGet();
            fail(heldOver, closed(heldOver, reason));
            heldOver = null;
        }
    }

    private int drainInbox(long now) {
        int work = 0;
        Outgoing m;
        while ((m = heldOver != null ? heldOver : inbox.poll()) != null) {
            PeerLink link = links[m.peer];
            if (!link.lock.tryLock()) {
                heldOver = m;                                   // a caller is sending on it: next cycle
                return work;
            }
            heldOver = null;
            try {
                if (link.queue.isEmpty()) {
                    link.waitingSinceNs = now;
                }
                prepare(link, m);
                link.queue.add(m);
            } finally {
                link.lock.unlock();
            }
            work++;
        }
        return work;
    }

    private int service(PeerLink link, long now) {
        String failure = transport.peerFailure(link.peer);
        if (failure != null) {
            settle(link);                                // what the peer released before it went is done
            if (!link.unsent.isEmpty() || !link.queue.isEmpty()) {
                link.publication.abandon();            // before the callers may free what it still reads
            }
            failQueue(link, m -> new PeerFailedException(context.rank(), link.peer, m.tag, failure));
            return 0;
        }
        if (link.brokenSinceNs != 0) {
            Outgoing head = link.queue.peek();
            if (now - link.brokenSinceNs >= BROKEN_LINK_GRACE_NS) {
                failLink(link, Publication.CLOSED, head == null ? -1 : head.tag);
            }
            return 0;
        }
        int work = link.publication.flush() > 0 ? 1 : 0;
        settle(link);
        boolean isAcknowledged = acknowledged.get(link.peer) == 1 || ignoreAcknowledgements;
        boolean helloDue = !link.helloSent || ackDue.get(link.peer) == 1
                || !isAcknowledged && now - link.lastHelloNs >= TimeUnit.MILLISECONDS.toNanos(HELLO_RETRY_MS);
        if (helloDue && link.publication.isConnected()) {
            boolean answering = ackDue.getAndSet(link.peer, 0) == 1;
            long result = offerControl(link, MessageDescriptor.HELLO);
            if (result > 0) {
                if (!link.helloSent) {
                    link.waitingSinceNs = now;
                }
                link.helloSent = true;
                link.lastHelloNs = now;
                link.lastSentNs = now;
                work++;
            } else {
                if (answering) {
                    ackDue.set(link.peer, 1);
                }
                if (!retryable(result)) {
                    failLink(link, result, -1);
                    return work;
                }
            }
        }
        if (!isAcknowledged || !link.helloSent) {
            checkStall(link, now);
            return work;
        }
        if (releaseDue.get(link.peer) != link.releaseSent && offerDueRelease(link) > 0) {
            link.lastSentNs = now;
            work++;
        }
        for (int i = 0; i < CHUNK_BUDGET && !link.queue.isEmpty(); i++) {
            Outgoing m = link.queue.peek();
            long result = offerChunk(link, m);
            if (result > 0) {
                link.lastSentNs = now;
                link.waitingSinceNs = now;
                work++;
                if (++m.nextChunk == m.chunkCount) {
                    link.queue.poll();
                    link.pending.decrementAndGet();
                    offered(link, m, result);
                }
            } else if (retryable(result)) {
                refusedOffers.incrementAndGet();
                if (result == Publication.BACK_PRESSURED) {
                    backPressured.incrementAndGet();
                }
                break;
            } else {
                failLink(link, result, m.tag);
                return work;
            }
        }
        checkStall(link, now);
        if (now - link.lastSentNs >= heartbeatNs) {
            // A refused heartbeat is simply tried again next cycle: a stalled link is caught by the queued data or
            // by the peer's silence check.
            if (offerControl(link, MessageDescriptor.HEARTBEAT) > 0) {
                link.lastSentNs = now;
                work++;
            }
        }
        return work;
    }

    /** Offers the current chunk of {@code m}; the header is built once per chunk and reused on retries. */
    private long offerChunk(PeerLink link, Outgoing m) {
        if (!m.chunkReady && m.nextChunk == 0) {
            decide(link, m);
            if (m.remote) {
                singleCopies.incrementAndGet();
                prepareRemote(link, m);
            }
        }
        if (!m.chunkReady) {
            long total = m.bytes.remaining();
            long offset = (long) m.nextChunk * link.chunkBytes;
            m.chunkLength = (int) Math.min(link.chunkBytes, total - offset);
            m.headerLength = MessageDescriptor.writeHeader(link.header, jobId, MessageDescriptor.DATA,
                    context.rank(), m.tag, m.dtype, m.shape, m.sequence, m.nextChunk, m.chunkCount, total, offset,
                    m.chunkLength);
            ByteBuffer chunk = m.bytes.slice((int) offset, m.chunkLength);
            if (m.chunkLength > 0) {
                link.payload.wrap(chunk, 0, m.chunkLength);
            } else {
                link.payload.wrap(new byte[0]);
            }
            if (!link.checksummed) {
                MessageDescriptor.putFlags(link.header, MessageDescriptor.PAYLOAD_UNCHECKED);
            }
            MessageDescriptor.checksumHeader(link.crc, link.header.byteArray(), m.shape.length);
            if (link.checksummed) {
                link.crc.update(chunk);
            }
            int checksum = (int) link.crc.getValue();
            if (link.corruptNextChunk) {
                link.corruptNextChunk = false;
                if (m.chunkLength > 0) {
                    // Damage the payload, as a bad link would: a copy of the chunk with one byte flipped goes on
                    // the wire under the checksum of the true bytes (the caller's array stays untouched).
                    byte[] damaged = new byte[m.chunkLength];
                    m.bytes.slice((int) offset, m.chunkLength).get(damaged);
                    damaged[damaged.length / 2] ^= 0x5A;
                    link.payload.wrap(damaged);
                } else {
                    checksum ^= 0x5A5A5A5A;             // nothing to damage in an empty chunk
                }
            }
            MessageDescriptor.putChecksum(link.header, checksum);
            m.chunkReady = true;
        }
        long result = link.publication.offer(link.header, m.headerLength, link.payload,
                m.remote ? MessageDescriptor.REMOTE_DESCRIPTOR_LENGTH : m.chunkLength);
        if (result > 0) {
            m.chunkReady = false;
        }
        return result;
    }

    /**
     * The header and descriptor of a single-copy message (one chunk of the whole array; its payload is the
     * array's address in this process), checksummed.
     */
    private void prepareRemote(PeerLink link, Outgoing m) {
        long total = m.bytes.remaining();
        m.chunkLength = (int) total;
        m.headerLength = MessageDescriptor.writeHeader(link.header, jobId, MessageDescriptor.DATA, context.rank(),
                m.tag, m.dtype, m.shape, m.sequence, 0, 1, total, 0, (int) total);
        MessageDescriptor.putFlags(link.header, MessageDescriptor.REMOTE_PAYLOAD);
        link.remoteDescriptor.putLong(0, ProcessMemory.address(m.bytes) + m.bytes.position(),
                java.nio.ByteOrder.LITTLE_ENDIAN);
        MessageDescriptor.checksumHeader(link.crc, link.header.byteArray(), m.shape.length);
        link.crc.update(link.remoteDescriptor.byteArray(), 0, MessageDescriptor.REMOTE_DESCRIPTOR_LENGTH);
        int checksum = (int) link.crc.getValue();
        if (link.corruptNextChunk) {
            link.corruptNextChunk = false;
            checksum ^= 0x5A5A5A5A;                      // the payload is not in the message: damage its checksum
        }
        MessageDescriptor.putChecksum(link.header, checksum);
        link.payload.wrap(link.remoteDescriptor, 0, MessageDescriptor.REMOTE_DESCRIPTOR_LENGTH);
        m.chunkReady = true;
    }

    /**
     * Offers a RELEASE of the peer's single-copy messages this rank has read since the last one, if any.
     *
     * @return the offer's result, or 1 when nothing was due
     */
    private long offerDueRelease(PeerLink link) {
        long due = releaseDue.get(link.peer);
        if (due == link.releaseSent) {
            return 1;
        }
        long result = offerControl(link, MessageDescriptor.RELEASE, due);
        if (result > 0) {
            link.releaseSent = due;
        }
        return result;
    }

    /** Offers a HELLO, HEARTBEAT, GOODBYE or RELEASE (of {@code sequence}). */
    private long offerControl(PeerLink link, byte type) {
        return offerControl(link, type, 0);
    }

    private long offerControl(PeerLink link, byte type, long sequence) {
        boolean hello = type == MessageDescriptor.HELLO;
        int payloadLength = hello ? MessageDescriptor.HELLO_PAYLOAD_LENGTH : 0;
        int headerLength = MessageDescriptor.writeHeader(link.control, jobId, type, context.rank(), 0, (byte) 0,
                new long[0], sequence, 0, 1, payloadLength, 0, payloadLength);
        if (hello) {
            boolean waiting = acknowledged.get(link.peer) == 0;
            int flags = (waiting ? MessageDescriptor.HELLO_WANTS_ACK : 0)
                    | (transport.readsPeer(link.peer) ? MessageDescriptor.HELLO_READS_YOU : 0);
            MessageDescriptor.writeHello(link.control, headerLength, helloDigest, context.worldSize(), flags,
                    incarnation, peerIncarnations.get(link.peer), pid, probeAddress);
        }
        link.control.getBytes(0, link.crcScratch, 0, headerLength + payloadLength);
        MessageDescriptor.checksumHeader(link.crc, link.crcScratch, 0);
        link.crc.update(link.crcScratch, headerLength, payloadLength);
        MessageDescriptor.putChecksum(link.control, (int) link.crc.getValue());
        return link.publication.offer(link.control, headerLength + payloadLength);
    }

    /** Fails the link's peer when its queued data has made no progress for the timeout. */
    private void checkStall(PeerLink link, long now) {
        // One heartbeat longer than the timeout, as a receive waits: a peer that died (or lost its driver) is
        // declared so by its silence first, and only a live peer that does not read fails here.
        Outgoing unread = link.unreleased.peek();
        boolean unreadStuck = unread != null && now - unread.offeredNs > timeoutNs + heartbeatNs;
        boolean queueStuck = !link.queue.isEmpty() && now - link.waitingSinceNs > timeoutNs;
        if (unreadStuck || queueStuck) {
            // A peer silent for the timeout (or a lost driver) is named as such, not as back pressure; the queue
            // then fails with the peer on the next cycle.
            transport.checkSilence(link.peer);
            if (transport.peerFailure(link.peer) != null) {
                return;
            }
        }
        if (unreadStuck) {
            link.unreleased.poll();
            Duration waited = Duration.ofNanos(now - unread.offeredNs);
            String why = "back pressure: the peer has not read the array";
            fail(unread, new PeerTimeoutException(context.rank(), link.peer, unread.tag, waited, "send (" + why + ")"));
            transport.failPeer(link.peer, "no send progress for " + waited.toMillis() + " ms (" + why + ")");
            return;
        }
        if (!queueStuck) {
            return;
        }
        if (!(link.publication instanceof TcpOutbound) && !transport.driverAlive()) {
            transport.driverLost();                    // the queue fails with the peer, on the next cycle
            return;
        }
        Outgoing head = link.queue.poll();
        link.pending.decrementAndGet();
        Duration waited = Duration.ofNanos(now - link.waitingSinceNs);
        String why = !link.publication.isConnected() ? "peer not connected"
                : acknowledged.get(link.peer) == 0 ? "peer did not acknowledge this transport's HELLO" : "back pressure";
        link.publication.abandon();                    // part of the head may still be read from its array
        fail(head, new PeerTimeoutException(context.rank(), link.peer, head.tag, waited, "send (" + why + ")"));
        transport.failPeer(link.peer, "no send progress for " + waited.toMillis() + " ms (" + why + ")");
    }

    private void failLink(PeerLink link, long result, int tag) {
        String where = "rank " + context.rank() + ": send to rank " + link.peer + (tag >= 0 ? " with tag " + tag : "");
        TransportException e;
        if (result == Publication.CLOSED && link.publication instanceof TcpOutbound) {
            long now = System.nanoTime();
            if (link.brokenSinceNs == 0) {
                link.brokenSinceNs = now == 0 ? 1 : now;
            }
            if (now - link.brokenSinceNs < BROKEN_LINK_GRACE_NS) {
                return;                                  // failed by service() after the grace, unless named sooner
            }
        }
        if (result == Publication.CLOSED) {
            String why = link.publication.closedReason();
            e = new TransportClosedException(where + " failed: " + (why != null ? why : "the publication is closed"));
        } else if (result == Publication.MAX_POSITION_EXCEEDED) {
            e = new MaxPositionExceededException(where + " failed: the publication reached its maximum position");
        } else {
            e = new TransportException(where + " failed: unexpected Aeron offer result " + result);
        }
        Outgoing head = link.queue.poll();
        if (head != null) {
            link.pending.decrementAndGet();
            fail(head, e);
        }
        transport.failPeer(link.peer, e.getMessage());
    }

    private int sayGoodbye(long now) {
        if (goodbyeDeadlineNs == 0) {
            goodbyeStarted.countDown();
            goodbyeDeadlineNs = now + Math.min(timeoutNs, Duration.ofSeconds(1).toNanos());
            failUnsent("closed");
            failHeldOver("closed");
            for (PeerLink link : links) {
                if (link != null) {
                    link.lock.lock();
                    try {
                        failQueued(link, m -> closed(m, "closed"));
                    } finally {
                        link.lock.unlock();
                    }
                }
            }
        }
        boolean pending = false;
        for (PeerLink link : links) {
            if (link == null || !link.helloSent || transport.peerFailure(link.peer) != null) {
                continue;
            }
            link.lock.lock();
            try {
                if (!link.goodbyeSent) {
                    // The peer's single-copy arrays this rank has read are released first: the peer fails a send
                    // still unreleased when the goodbye comes.
                    long result = offerDueRelease(link);
                    if (result > 0) {
                        result = offerControl(link, MessageDescriptor.GOODBYE);
                    }
                    if (result > 0) {
                        link.goodbyeSent = true;
                        link.goodbyePosition = result;
                    } else {
                        pending |= retryable(result);
                    }
                }
                link.publication.flush();
                settle(link);
                // The peer may still be reading a single-copy array: the caller frees it once its send fails.
                if (link.goodbyeSent && !link.publication.sent(link.goodbyePosition) || !link.unreleased.isEmpty()) {
                    pending = true;
                }
            } finally {
                link.lock.unlock();
            }
        }
        if (!pending || now - goodbyeDeadlineNs > 0) {
            goodbyeDone.countDown();
        }
        return 0;
    }

    private interface FailureFactory {
        TransportException failure(Outgoing m);
    }

    /**
     * Fails the queued sends and those whose payload the link still reads: only once nothing will write from
     * them again (the peer failed, or the progress thread stops), since the caller may free them on failure.
     */
    private void failQueue(PeerLink link, FailureFactory factory) {
        Outgoing m;
        while ((m = link.unsent.poll()) != null) {
            fail(m, factory.failure(m));
        }
        while ((m = link.unreleased.poll()) != null) {
            fail(m, factory.failure(m));
        }
        failQueued(link, factory);
    }

    /** Fails the sends not yet offered. */
    private void failQueued(PeerLink link, FailureFactory factory) {
        Outgoing m;
        while ((m = link.queue.poll()) != null) {
            link.pending.decrementAndGet();
            fail(m, factory.failure(m));
        }
    }

    private static void fail(Outgoing m, TransportException e) {
        TransportThreads.complete(m.completion, () -> m.future.completeExceptionally(e));
    }

    private TransportClosedException closed(Outgoing m, String reason) {
        return new TransportClosedException("rank " + context.rank() + ": send to rank " + m.peer + " with tag "
                + m.tag + " failed: transport " + reason);
    }

    private static boolean retryable(long result) {
        return result == Publication.BACK_PRESSURED || result == Publication.ADMIN_ACTION
                || result == Publication.NOT_CONNECTED;
    }
}
