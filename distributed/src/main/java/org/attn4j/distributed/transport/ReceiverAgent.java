package org.attn4j.distributed.transport;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.zip.CRC32C;

import io.aeron.Subscription;
import io.aeron.logbuffer.ControlledFragmentHandler;
import io.aeron.logbuffer.FrameDescriptor;
import io.aeron.logbuffer.Header;
import org.agrona.DirectBuffer;
import org.agrona.UnsafeApi;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.UnsafeBuffer;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The receiving side of an {@link AeronTransport}, run by its progress thread: polls the subscriptions (UDP, and
 * IPC for same-host peers), admits a connection (an Aeron image, one per sending peer) only after a valid HELLO
 * (which it reports to the sender, for the acknowledgements of {@link MessageDescriptor}), copies DATA chunks
 * straight from the term buffer into the array a waiting receive gave ({@link Mailbox#claim}) or else a new one,
 * checks every chunk's CRC32C, and hands complete arrays to the mailbox.
 * It also declares peers failed when they stay silent for the timeout.
 *
 * <p>Fragments are handled one by one instead of through Aeron's {@code FragmentAssembler}: the assembler
 * would copy every chunk into its own buffer first, and this class copies it once, into ND4J's memory. An image
 * carries one peer's messages in order, so one chunk per image is in progress at a time.
 */
final class ReceiverAgent implements Agent, ControlledFragmentHandler, TcpInbound.Sink {

    private static final Logger LOG = LoggerFactory.getLogger(ReceiverAgent.class);
    private static final int FRAGMENT_LIMIT = 64;
    /**
     * The smallest message worth leaving in the log (or the TCP socket) for a receive to be posted: one that no
     * receive waits for yet stays there up to {@link AeronTransportContext#lateReceiveWait()} before it is read
     * into a new array, and a receive posted meanwhile (ranks enter a collective a little apart) takes it straight
     * into the caller's array, sparing an allocation and a second pass over the bytes. Messages behind it from the
     * same peer wait that long at most, and its sender only once its log window or socket buffers are full.
     */
    static final long DEFER_MIN_BYTES = 64 << 10;

    /** What is known about one image (one sender's connection), and the message it is in the middle of. */
    private static final class Session {
        final int sessionId;
        /** Whether the connection is an IPC one (the only kind that may skip payload checksums). */
        final boolean ipc;
        /** Whether the connection is a TCP one (not an Aeron image). */
        final boolean tcp;
        int peer = -1;
        /** Skip fragments up to the end of the current Aeron message. */
        boolean discarding;
        boolean droppedBefore;
        long expectedSequence;
        /** The large message left in the log for a receive to be posted ({@link #DEFER_MIN_BYTES}), or -1. */
        long deferredSequence = -1;
        long deferredSinceNs;
        /**
         * Set when a deferral ran out without a receive: this peer's messages are read at once until one finds
         * its receive waiting again (a receiver that posts late gains nothing from waiting).
         */
        boolean eager;
        /** A message whose array could not be allocated: its remaining chunks are skipped quietly. */
        long skippedSequence = -1;
        // The message being assembled.
        INDArray array;
        ByteBuffer bytes;
        /** The receive whose array the message is written into, or null (a new array). */
        Mailbox.Waiter claimed;
        /** Whether the message is added to the claimed receive's addend on its way in ({@link #sum}). */
        boolean summing;
        boolean summingDoubles;
        final UnsafeBuffer sumInto = new UnsafeBuffer(new byte[0]);
        final UnsafeBuffer sumAddend = new UnsafeBuffer(new byte[0]);
        int tag;
        long sequence;
        int chunkCount;
        int nextChunk;
        String damage;
        // The chunk being assembled.
        boolean inChunk;
        int chunkIndex;
        int chunkLength;
        int chunkWritten;
        int chunkOffset;
        int expectedCrc;
        boolean payloadChecked;
        final CRC32C crc = new CRC32C();

        Session(int sessionId, boolean ipc, boolean tcp) {
            this.sessionId = sessionId;
            this.ipc = ipc;
            this.tcp = tcp;
        }
    }

    private final AeronTransport transport;
    private final AeronTransportContext context;
    private final JobToken token;
    /** The UDP subscription, then the IPC one if this rank has same-host peers. */
    private final Subscription[] subscriptions;
    private final boolean[] ipcSubscription;
    private final Mailbox mailbox;
    private final int rank;
    private final long timeoutNs;
    private final long livenessCheckNs;
    private final Int2ObjectHashMap<Session> sessions = new Int2ObjectHashMap<>();
    /** Session id to peer rank, read by the image-unavailable handler on Aeron's conductor thread. */
    private final Map<Integer, Integer> sessionPeers = new ConcurrentHashMap<>();
    /** When each peer was last heard (0: never); written by this agent, read by any thread ({@link #checkSilence}). */
    private final AtomicLongArray lastHeardNs;
    private final boolean[] helloReceived;
    /** Per peer: its process id once this process read its probe (single copy), else 0. */
    private final long[] readablePids;
    /** Per peer: whether its probe was tried. */
    private final boolean[] probed;
    private final ProcessMemory memory = new ProcessMemory();
    /** Where a single-copy payload that is summed on arrival lands piece by piece; allocated on first use. */
    private ByteBuffer sumPiece;
    private final UnsafeBuffer sumPieceBuffer = new UnsafeBuffer(new byte[0]);
    private final byte[] descriptor = new byte[MessageDescriptor.REMOTE_DESCRIPTOR_LENGTH];
    private final UnsafeBuffer descriptorBuffer = new UnsafeBuffer(descriptor);
    /** Bytes of a summed single-copy payload read per system call: a piece that stays in the core's cache. */
    static final int SUM_PIECE_BYTES = 256 << 10;
    private final byte[] scratch = new byte[MessageDescriptor.MAX_HEADER_LENGTH
            + MessageDescriptor.HELLO_PAYLOAD_LENGTH];
    private final UnsafeBuffer header = new UnsafeBuffer(scratch);
    private final CRC32C controlCrc = new CRC32C();
    /** For checksums of buffers with neither an array nor a ByteBuffer behind them. */
    private final byte[] crcCopy = new byte[16 << 10];
    private final AtomicLong dropped = new AtomicLong();
    private final AtomicLong corrupt = new AtomicLong();
    private final AtomicLong direct = new AtomicLong();
    private volatile long stallUntilNs;
    private long nextLivenessCheckNs;
    private final long deferNs;
    /** Set by {@link #defer}: the fragment being handled stays in the log. */
    private boolean deferring;
    /** Whether the subscription being polled is the IPC one. */
    private boolean pollingIpc;
    /** The TCP links' receiving ends, or null when no peer is reached over TCP. */
    private final TcpInbound tcp;
    private int tcpSessions;

    /**
     * @param udp the subscription on this rank's UDP endpoint
     * @param ipc the IPC subscription, or null when no peer shares this host
     * @param tcp the TCP listener and connections, or null when no peer is reached over TCP
     */
    ReceiverAgent(AeronTransport transport, AeronTransportContext context, JobToken token, Subscription udp,
                  Subscription ipc, TcpInbound tcp, Mailbox mailbox) {
        this.tcp = tcp;
        this.transport = transport;
        this.context = context;
        this.deferNs = context.lateReceiveWait().toNanos();
        this.token = token;
        this.subscriptions = ipc == null ? new Subscription[] {udp} : new Subscription[] {udp, ipc};
        this.ipcSubscription = ipc == null ? new boolean[] {false} : new boolean[] {false, true};
        this.mailbox = mailbox;
        this.rank = context.rank();
        this.timeoutNs = context.timeout().toNanos();
        this.livenessCheckNs = context.heartbeatInterval().toNanos() / 2;
        this.lastHeardNs = new AtomicLongArray(context.worldSize());
        this.helloReceived = new boolean[context.worldSize()];
        this.readablePids = new long[context.worldSize()];
        this.probed = new boolean[context.worldSize()];
    }

    @Override
    public String roleName() {
        return "attn4j-receiver-rank" + rank;
    }

    /** Messages dropped because they came from another job, an unknown rank, or a connection without HELLO. */
    long droppedMessages() {
        return dropped.get();
    }

    /** DATA messages that arrived damaged (checksum or chunk mismatch) and were not delivered. */
    long corruptMessages() {
        return corrupt.get();
    }

    /** Messages written straight into a receive's own array. */
    long directMessages() {
        return direct.get();
    }

    /** Whether this process read {@code peer}'s probe, so can take single-copy messages from it; progress thread. */
    boolean readsPeer(int peer) {
        return readablePids[peer] != 0;
    }

    /** The peer that sent a valid HELLO on {@code sessionId}, or null. */
    Integer peerOfSession(int sessionId) {
        return sessionPeers.get(sessionId);
    }

    /** Stops polling until {@code untilNs} (test hook for a slow receiver). */
    void stallUntil(long untilNs) {
        stallUntilNs = untilNs;
    }

    @Override
    public int doWork() {
        long now = System.nanoTime();
        if (now - stallUntilNs < 0) {
            return 0;
        }
        int work = 0;
        mailbox.reapAbandoned();                       // between writes: no array is written after its receive failed
        for (int i = 0; i < subscriptions.length; i++) {
            pollingIpc = ipcSubscription[i];
            work += subscriptions[i].controlledPoll(this, FRAGMENT_LIMIT);
        }
        if (tcp != null) {
            work += tcp.poll(this);
        }
        if (now - nextLivenessCheckNs >= 0) {
            nextLivenessCheckNs = now + livenessCheckNs;
            checkLiveness(System.nanoTime());
        }
        return work;
    }

    /** An Aeron fragment; a deferred message's first ({@link #defer}) is left in the log. */
    @Override
    public Action onFragment(DirectBuffer buffer, int offset, int length, Header aeronHeader) {
        Session s = sessions.get(aeronHeader.sessionId());
        if (s == null) {
            s = new Session(aeronHeader.sessionId(), pollingIpc, false);
            sessions.put(s.sessionId, s);
        }
        byte flags = aeronHeader.flags();
        onFragment(s, buffer, offset, length, (flags & FrameDescriptor.BEGIN_FRAG_FLAG) != 0,
                (flags & FrameDescriptor.END_FRAG_FLAG) != 0);
        return taken() ? Action.CONTINUE : Action.ABORT;
    }

    @Override
    public Object opened(String from) {
        Session s = new Session(++tcpSessions, false, true);
        LOG.debug("rank {}: TCP connection {} from {}", rank, s.sessionId, from);
        return s;
    }

    @Override
    public boolean fragment(Object session, UnsafeBuffer buffer, int offset, int length, boolean begin, boolean end) {
        onFragment((Session) session, buffer, offset, length, begin, end);
        return taken();
    }

    /** Whether the fragment just handled was taken, not left for later by {@link #defer}; clears the mark. */
    private boolean taken() {
        boolean deferred = deferring;
        deferring = false;
        return !deferred;
    }

    @Override
    public ByteBuffer target(Object session, int max) {
        Session s = (Session) session;
        if (s.discarding || !s.inChunk || s.bytes == null || s.summing
                || s.claimed != null && s.claimed.abandoned != null) {
            return null;
        }
        int room = s.chunkLength - s.chunkWritten;
        return room <= 0 ? null : s.bytes.slice(s.chunkOffset + s.chunkWritten, Math.min(room, max));
    }

    @Override
    public void wroteTarget(Object session, int n, boolean end) {
        Session s = (Session) session;
        if (s.payloadChecked) {
            s.crc.update(s.bytes.slice(s.chunkOffset + s.chunkWritten, n));
        }
        s.chunkWritten += n;
        if (end) {
            onChunkEnd(s);
            s.discarding = false;
        }
    }

    @Override
    public void closed(Object session, String why) {
        Session s = (Session) session;
        if (s.array != null && s.claimed == null) {
            s.array.close();                    // a message cut short; a claimed receive fails with the peer
        }
        s.array = null;
        s.bytes = null;
        s.claimed = null;
        s.summing = false;
        if (s.peer >= 0) {
            // After a GOODBYE the peer has left already, and this changes nothing.
            transport.failPeer(s.peer, "its TCP connection to rank " + rank + " ended: " + why);
        } else {
            LOG.debug("rank {}: TCP connection {} without a HELLO ended: {}", rank, s.sessionId, why);
        }
    }

    private void onFragment(Session s, DirectBuffer buffer, int offset, int length, boolean begin, boolean end) {
        if (begin) {
            s.discarding = false;
            s.inChunk = false;
            onMessageStart(s, buffer, offset, length, end);
        } else if (!s.discarding) {
            if (s.inChunk) {
                copy(s, buffer, offset, length);
            } else {
                drop(s, "continuation without a start");
            }
        }
        if (end) {
            if (!s.discarding && s.inChunk) {
                onChunkEnd(s);
            }
            s.discarding = false;
        }
    }

    private void onMessageStart(Session s, DirectBuffer buffer, int offset, int length, boolean end) {
        if (length < MessageDescriptor.FIXED_HEADER_LENGTH) {
            drop(s, "message of " + length + " bytes is shorter than a header");
            return;
        }
        int arrayRank = MessageDescriptor.arrayRank(buffer, offset);
        int headerLength = MessageDescriptor.headerLength(arrayRank);
        if (arrayRank > MessageDescriptor.MAX_ARRAY_RANK || length < headerLength) {
            drop(s, "malformed header");
            return;
        }
        buffer.getBytes(offset, scratch, 0, headerLength);
        if (MessageDescriptor.jobId(header) != token.jobId()) {
            drop(s, String.format("job id %016x is not this job's (%s)", MessageDescriptor.jobId(header), token));
            return;
        }
        if (MessageDescriptor.version(header) != MessageDescriptor.VERSION) {
            drop(s, "wire version " + MessageDescriptor.version(header) + ", expected " + MessageDescriptor.VERSION);
            return;
        }
        byte type = MessageDescriptor.type(header);
        if (type == MessageDescriptor.HELLO) {
            onHello(s, buffer, offset, length, end, headerLength);
            return;
        }
        int source = MessageDescriptor.sourceRank(header);
        if (s.peer < 0 || source != s.peer) {
            if (s.peer < 0 && !s.tcp) {
                // This job's id but no HELLO first on an Aeron image: the rest of the log of a transport this job
                // closed (a worker that opens its transports one after another), which this one joined part way.
                dropQuietly(s, "no HELLO on this connection: the end of a closed transport of this job");
            } else {
                drop(s, s.peer < 0 ? "no HELLO on this connection" : "claims rank " + source + " on rank " + s.peer
                        + "'s connection");
            }
            return;
        }
        lastHeardNs.setRelease(s.peer, System.nanoTime());
        if (type == MessageDescriptor.DATA) {
            onDataStart(s, buffer, offset, length, headerLength, arrayRank);
        } else if (type == MessageDescriptor.HEARTBEAT || type == MessageDescriptor.GOODBYE
                || type == MessageDescriptor.RELEASE) {
            if (!end || length != headerLength || !controlChecksumMatches(headerLength, 0)) {
                countCorrupt(s, "damaged control message");
                s.discarding = true;
            } else if (type == MessageDescriptor.GOODBYE) {
                transport.peerLeft(s.peer);
            } else if (type == MessageDescriptor.RELEASE) {
                transport.releasedBy(s.peer, MessageDescriptor.sequence(header));
            }
        } else {
            drop(s, "unknown message type " + type);
        }
    }

    private void onHello(Session s, DirectBuffer buffer, int offset, int length, boolean end, int headerLength) {
        int source = MessageDescriptor.sourceRank(header);
        if (!end || length != headerLength + MessageDescriptor.HELLO_PAYLOAD_LENGTH) {
            drop(s, "malformed HELLO");
            return;
        }
        buffer.getBytes(offset + headerLength, scratch, headerLength, MessageDescriptor.HELLO_PAYLOAD_LENGTH);
        if (!controlChecksumMatches(headerLength, MessageDescriptor.HELLO_PAYLOAD_LENGTH)) {
            drop(s, "HELLO with a bad checksum");
            return;
        }
        byte[] digest = Arrays.copyOfRange(scratch, headerLength, headerLength + JobToken.DIGEST_LENGTH);
        int worldSize = MessageDescriptor.helloWorldSize(header, headerLength);
        if (!token.matches(digest)) {
            drop(s, "HELLO without this job's token");
        } else if (worldSize != context.worldSize() || source < 0 || source >= context.worldSize()
                || source == rank) {
            drop(s, "HELLO from rank " + source + " of a world of " + worldSize + "; this is rank " + rank
                    + " of " + context.worldSize());
        } else if (s.peer >= 0 && s.peer != source) {
            drop(s, "HELLO from rank " + source + " on rank " + s.peer + "'s connection");
        } else if (s.peer < 0 && helloReceived[source]) {
            // With the job's token: that rank's next transport, opened while this one still talks to its last.
            dropQuietly(s, "HELLO from rank " + source + ", which is already connected: its next transport, "
                    + "connected once this one closes");
        } else {
            if (s.peer != source) {
                s.peer = source;
                if (!s.tcp) {
                    sessionPeers.put(s.sessionId, source);
                }
                helloReceived[source] = true;
                LOG.debug("rank {}: rank {} connected (session {})", rank, source, s.sessionId);
            }
            lastHeardNs.setRelease(source, System.nanoTime());
            long peerIncarnation = MessageDescriptor.helloIncarnation(header, headerLength);
            if (s.ipc && !probed[source]) {
                probe(source, MessageDescriptor.helloPid(header, headerLength),
                        MessageDescriptor.helloProbeAddress(header, headerLength), peerIncarnation);
            }
            int flags = MessageDescriptor.helloFlags(header, headerLength);
            transport.helloFrom(source, peerIncarnation, MessageDescriptor.helloAcknowledged(header, headerLength),
                    (flags & MessageDescriptor.HELLO_WANTS_ACK) != 0,
                    s.ipc && (flags & MessageDescriptor.HELLO_READS_YOU) != 0);
        }
    }

    /**
     * Tries to read the 8 bytes at {@code address} in the same-host peer's process {@code pid}, which hold its
     * incarnation: when they read back, this process can take single-copy messages from it, and its HELLOs say so.
     * A peer that sends no probe (single copy off there) is not read.
     */
    private void probe(int peer, long pid, long address, long incarnation) {
        probed[peer] = true;
        if (!context.singleCopy() || pid <= 0 || address == 0) {
            return;
        }
        if (ProcessMemory.available() && memory.probe(pid, address, incarnation)) {
            readablePids[peer] = pid;
        } else {
            LOG.warn("rank {}: cannot read the memory of rank {} on this host (process_vm_readv {}); large arrays "
                    + "from it go through the shared log, one copy more", rank, peer,
                    ProcessMemory.available() ? "refused: the kernel's ptrace rules or a seccomp profile" : "missing");
        }
    }

    private boolean controlChecksumMatches(int headerLength, int payloadLength) {
        MessageDescriptor.checksumHeader(controlCrc, scratch, 0);
        controlCrc.update(scratch, headerLength, payloadLength);
        return (int) controlCrc.getValue() == MessageDescriptor.checksum(header);
    }

    private void onDataStart(Session s, DirectBuffer buffer, int offset, int length, int headerLength,
                             int arrayRank) {
        int tag = MessageDescriptor.tag(header);
        int chunkIndex = MessageDescriptor.chunkIndex(header);
        int chunkCount = MessageDescriptor.chunkCount(header);
        int chunkLength = MessageDescriptor.chunkLength(header);
        long sequence = MessageDescriptor.sequence(header);
        long payloadLength = MessageDescriptor.payloadLength(header);
        long chunkOffset = MessageDescriptor.chunkOffset(header);
        DataType dtype = MessageDescriptor.dataType(MessageDescriptor.dtype(header));
        long[] shape = MessageDescriptor.shape(header, arrayRank);
        boolean remote = (MessageDescriptor.flags(header) & MessageDescriptor.REMOTE_PAYLOAD) != 0;
        String invalid = validate(tag, dtype, shape, payloadLength, chunkIndex, chunkCount, chunkOffset, chunkLength,
                length - headerLength);
        if (invalid == null && remote && (chunkCount != 1 || chunkLength != payloadLength
                || length - headerLength != MessageDescriptor.REMOTE_DESCRIPTOR_LENGTH)) {
            invalid = "a single-copy message of " + chunkCount + " chunks, " + chunkLength + " of " + payloadLength
                    + " bytes, " + (length - headerLength) + " bytes after its header";
        }
        if (invalid != null) {
            // Without a trustworthy header the message cannot be matched to a receive; the receive times out.
            countCorrupt(s, "invalid DATA header: " + invalid);
            s.discarding = true;
            return;
        }
        if (chunkIndex == 0) {
            if (defer(s, sequence, tag, payloadLength)) {
                return;
            }
            if (s.array != null) {
                s.damage = "it ended after chunk " + s.nextChunk + " of " + s.chunkCount;
                finishMessage(s);
            }
            if (sequence != s.expectedSequence) {
                LOG.warn("rank {}: message {} from rank {} arrived where {} was expected", rank, sequence, s.peer,
                        s.expectedSequence);
            }
            s.expectedSequence = sequence + 1;
            long elements = payloadLength / Math.max(1, dtype.width());
            s.claimed = mailbox.claim(s.peer, tag, dtype, elements);
            try {
                // Straight into the caller's array when a receive gave one, else into a new array.
                s.array = s.claimed != null ? s.claimed.into() : Nd4j.createUninitialized(dtype, shape, 'c');
                s.bytes = ArrayBytes.bytes(s.array);
                s.summing = s.claimed != null && s.claimed.addend() != null && elements > 0;
                if (s.summing) {
                    s.summingDoubles = dtype == DataType.DOUBLE;
                    s.sumInto.wrap(s.bytes);
                    s.sumAddend.wrap(ArrayBytes.bytes(s.claimed.addend()));
                }
            } catch (RuntimeException | OutOfMemoryError e) {
                // The receive fails instead of waiting for the timeout; the rest of the message is skipped.
                s.array = null;
                s.discarding = true;
                s.skippedSequence = sequence;
                countCorrupt(s, "no memory for message " + sequence + " (" + payloadLength + " bytes): " + e);
                TransportException failure = new TransportException("rank " + rank + ": could not allocate "
                        + payloadLength + " bytes for a message from rank " + s.peer + " with tag " + tag, e);
                if (s.claimed != null) {
                    mailbox.finishClaimed(s.claimed, failure);
                    s.claimed = null;
                } else {
                    mailbox.deliverFailure(s.peer, tag, failure);
                }
                return;
            }
            s.tag = tag;
            s.sequence = sequence;
            s.chunkCount = chunkCount;
            s.nextChunk = 0;
            s.damage = null;
        } else if (s.array == null || sequence != s.sequence || tag != s.tag) {
            if (sequence != s.skippedSequence) {
                countCorrupt(s, "chunk " + chunkIndex + " of message " + sequence + " without its start");
            }
            s.discarding = true;
            return;
        }
        if (chunkIndex != s.nextChunk && s.damage == null) {
            s.damage = "chunk " + chunkIndex + " arrived where chunk " + s.nextChunk + " was expected";
        }
        s.inChunk = true;
        s.chunkIndex = chunkIndex;
        s.chunkLength = chunkLength;
        s.chunkWritten = 0;
        s.chunkOffset = (int) chunkOffset;
        s.expectedCrc = MessageDescriptor.checksum(header);
        s.payloadChecked = (MessageDescriptor.flags(header) & MessageDescriptor.PAYLOAD_UNCHECKED) == 0;
        if (!s.payloadChecked && !s.ipc && s.damage == null) {
            s.damage = "a chunk without a payload checksum over UDP";
        }
        MessageDescriptor.checksumHeader(s.crc, scratch, arrayRank);
        if (remote) {
            readRemote(s, buffer, offset + headerLength);
            return;
        }
        copy(s, buffer, offset + headerLength, length - headerLength);
    }

    /**
     * A single-copy message ({@link MessageDescriptor#REMOTE_PAYLOAD}): copies its payload from the sender's
     * memory into the message's array (adding this member's share on the way for a summing receive), finishes the
     * message and releases the sender's array.
     */
    private void readRemote(Session s, DirectBuffer buffer, int at) {
        s.inChunk = false;
        long sequence = s.sequence;
        buffer.getBytes(at, descriptor, 0, descriptor.length);
        s.crc.update(descriptor, 0, descriptor.length);
        if ((int) s.crc.getValue() != s.expectedCrc) {
            s.damage = "checksum mismatch in a single-copy message";
        } else if (!s.ipc || readablePids[s.peer] == 0) {
            s.damage = "a single-copy message from a peer whose memory this rank cannot read";
        } else if (s.claimed != null && s.claimed.abandoned != null) {
            abandon(s, null);
            transport.release(s.peer, sequence);
            return;
        } else if (s.damage == null) {
            long address = descriptorBuffer.getLong(0, java.nio.ByteOrder.LITTLE_ENDIAN);
            String failure = s.summing ? readSum(s, readablePids[s.peer], address)
                    : memory.read(readablePids[s.peer], address, ProcessMemory.address(s.bytes), s.chunkLength);
            if (ProcessMemory.processGone(failure)) {
                // The peer died with the message unread: it fails now, and with it this receive and every later one
                // from it (the collectives tell the other ranks, naming it).
                String why = "its process is gone (" + failure + ")";
                transport.failPeer(s.peer, why);
                abandon(s, new PeerFailedException(rank, s.peer, s.tag, why));
                return;
            } else if (failure != null) {
                s.damage = "could not read the payload from rank " + s.peer + "'s memory: " + failure;
            } else {
                s.chunkWritten = s.chunkLength;
            }
        }
        transport.release(s.peer, sequence);
        finishMessage(s);
    }

    /** Reads a summed single-copy payload piece by piece into a cached buffer and adds each piece into place. */
    private String readSum(Session s, long pid, long address) {
        if (sumPiece == null) {
            sumPiece = ByteBuffer.allocateDirect(SUM_PIECE_BYTES);
            sumPieceBuffer.wrap(sumPiece);
        }
        long piece = ProcessMemory.address(sumPiece);
        for (int done = 0; done < s.chunkLength; ) {
            int n = Math.min(SUM_PIECE_BYTES, s.chunkLength - done);
            String failure = memory.read(pid, address + done, piece, n);
            if (failure != null) {
                return failure;
            }
            sum(s, sumPieceBuffer, 0, done, n);
            done += n;
        }
        return null;
    }

    /**
     * Whether to leave the message starting here in the log or socket for now ({@link #DEFER_MIN_BYTES}): a large one
     * that no receive waits for yet, unless this peer's last deferral ran out ({@link Session#eager}).
     */
    private boolean defer(Session s, long sequence, int tag, long payloadLength) {
        if (deferNs == 0 || payloadLength < DEFER_MIN_BYTES) {
            return false;
        }
        if (mailbox.awaits(s.peer, tag)) {
            s.deferredSequence = -1;
            s.eager = false;
            return false;
        }
        if (s.eager) {
            return false;
        }
        long now = System.nanoTime();
        if (s.deferredSequence != sequence) {
            s.deferredSequence = sequence;
            s.deferredSinceNs = now;
        }
        if (now - s.deferredSinceNs >= deferNs) {
            s.deferredSequence = -1;
            s.eager = true;
            return false;
        }
        deferring = true;
        return true;
    }

    private String validate(int tag, DataType dtype, long[] shape, long payloadLength, int chunkIndex,
                            int chunkCount, long chunkOffset, int chunkLength, int bytesHere) {
        if (tag < 0 || dtype == null) {
            return tag < 0 ? "negative tag " + tag : "unknown dtype";
        }
        long elements = 1;
        for (long d : shape) {
            if (d < 0 || d > Integer.MAX_VALUE) {
                return "dimension " + d;
            }
            elements *= d;
            if (elements > Integer.MAX_VALUE) {
                return "more than 2^31 elements";
            }
        }
        if (elements * dtype.width() != payloadLength || payloadLength > context.maxMessageBytes()) {
            return "payload length " + payloadLength + " for shape " + Arrays.toString(shape) + " of " + dtype;
        }
        if (chunkCount < 1 || chunkIndex < 0 || chunkIndex >= chunkCount || chunkLength < 0 || chunkOffset < 0
                || chunkOffset + chunkLength > payloadLength || bytesHere > chunkLength) {
            return "chunk " + chunkIndex + " of " + chunkCount + " at " + chunkOffset + " (" + chunkLength
                    + " bytes) in " + payloadLength + " bytes";
        }
        return null;
    }

    /** Copies a fragment's bytes into the array and feeds the checksum while they are in cache. */
    private void copy(Session s, DirectBuffer buffer, int offset, int length) {
        if (length == 0) {
            return;
        }
        if (s.claimed != null && s.claimed.abandoned != null) {
            abandon(s, null);
            return;
        }
        if (s.chunkWritten + length > s.chunkLength) {
            if (s.damage == null) {
                s.damage = "chunk " + s.chunkIndex + " is longer than its " + s.chunkLength + " bytes";
            }
            return;
        }
        int at = s.chunkOffset + s.chunkWritten;
        if (s.summing) {
            if (s.payloadChecked) {
                checksum(s.crc, buffer, offset, length);
            }
            int width = s.summingDoubles ? Double.BYTES : Float.BYTES;
            if (at % width != 0 || length % width != 0) {
                // Fragments of a chunk hold whole elements (headers and frames are multiples of 8 bytes).
                if (s.damage == null) {
                    s.damage = "a fragment of " + length + " bytes at byte " + at + " splits an element";
                }
                return;
            }
            sum(s, buffer, offset, at, length);
        } else {
            buffer.getBytes(offset, s.bytes, at, length);
            if (s.payloadChecked) {
                s.crc.update(s.bytes.slice(at, length));
            }
        }
        s.chunkWritten += length;
    }

    /**
     * The peer failed while its message was being written: a receive's array gets no more writes (its caller may
     * free it) and the receive fails with the peer's failure (or {@code failure}); a new array is freed. The rest
     * of the message is skipped.
     */
    private void abandon(Session s, TransportException failure) {
        if (s.claimed != null) {
            mailbox.finishClaimed(s.claimed, failure);
        } else if (s.array != null) {
            s.array.close();
        }
        s.claimed = null;
        s.array = null;
        s.bytes = null;
        s.summing = false;
        s.skippedSequence = s.sequence;
        s.inChunk = false;
        s.discarding = true;
    }

    /**
     * Writes {@code message[offset..] + addend[at..]} into {@code into[at..]}, {@code length} bytes of whole
     * elements. One bounds check per fragment, then plain loads and stores the JIT compiles to a tight loop: about
     * twice the element rate of {@code UnsafeBuffer}'s checked accessors (13.5-14.4 against 6.6-6.9 GB/s of
     * message bytes on the benchmark machine, fragments of 64-256 KiB).
     */
    private static void sum(Session s, DirectBuffer message, int offset, int at, int length) {
        UnsafeBuffer into = s.sumInto;
        UnsafeBuffer addend = s.sumAddend;
        into.boundsCheck(at, length);
        addend.boundsCheck(at, length);
        message.boundsCheck(offset, length);
        byte[] m = message.byteArray();                          // null for off-heap memory (term buffers, sockets)
        long mAt = message.addressOffset() + offset;
        long iAt = into.addressOffset() + at;
        long aAt = addend.addressOffset() + at;
        if (s.summingDoubles) {
            for (int i = 0; i < length; i += Double.BYTES) {
                UnsafeApi.putDouble(iAt + i, UnsafeApi.getDouble(m, mAt + i) + UnsafeApi.getDouble(aAt + i));
            }
        } else {
            for (int i = 0; i < length; i += Float.BYTES) {
                UnsafeApi.putFloat(iAt + i, UnsafeApi.getFloat(m, mAt + i) + UnsafeApi.getFloat(aAt + i));
            }
        }
    }

    /** Feeds {@code length} bytes of {@code buffer} to the checksum, without copying where the buffer allows. */
    private void checksum(CRC32C crc, DirectBuffer buffer, int offset, int length) {
        ByteBuffer b = buffer.byteBuffer();
        if (b != null) {
            int from = buffer.wrapAdjustment() + offset;
            crc.update(b.duplicate().clear().limit(from + length).position(from));
        } else if (buffer.byteArray() != null) {
            crc.update(buffer.byteArray(), buffer.wrapAdjustment() + offset, length);
        } else {
            for (int done = 0; done < length; ) {
                int n = Math.min(crcCopy.length, length - done);
                buffer.getBytes(offset + done, crcCopy, 0, n);
                crc.update(crcCopy, 0, n);
                done += n;
            }
        }
    }

    private void onChunkEnd(Session s) {
        s.inChunk = false;
        if (s.damage == null && s.chunkWritten != s.chunkLength) {
            s.damage = "chunk " + s.chunkIndex + " has " + s.chunkWritten + " of its " + s.chunkLength + " bytes";
        }
        if (s.damage == null && (int) s.crc.getValue() != s.expectedCrc) {
            s.damage = "checksum mismatch in chunk " + s.chunkIndex + " of " + s.chunkCount;
        }
        s.nextChunk = s.chunkIndex + 1;
        if (s.chunkIndex == s.chunkCount - 1) {
            finishMessage(s);
        }
    }

    private void finishMessage(Session s) {
        if (s.damage == null) {
            if (s.claimed != null) {
                direct.incrementAndGet();                     // before the receive can complete and be seen
                mailbox.finishClaimed(s.claimed, null);
            } else {
                mailbox.deliver(s.peer, s.tag, s.array);
            }
        } else {
            countCorrupt(s, "message " + s.sequence + " with tag " + s.tag + ": " + s.damage);
            CorruptMessageException e = new CorruptMessageException(rank, s.peer, s.tag,
                    s.damage + " (message " + s.sequence + ")");
            if (s.claimed != null) {
                mailbox.finishClaimed(s.claimed, e);
            } else {
                mailbox.deliverFailure(s.peer, s.tag, e);
                s.array.close();
            }
        }
        s.array = null;
        s.bytes = null;
        s.claimed = null;
        s.summing = false;
    }

    private void checkLiveness(long now) {
        for (int p = 0; p < lastHeardNs.length(); p++) {
            if (helloReceived[p] && checkSilence(p, now)) {
                return;
            }
        }
    }

    /**
     * Applies the liveness rule to {@code peer} now, from any thread: a receive or a send about to time out on
     * it asks first, so that a peer silent for the timeout is named as failed whichever thread gets there first.
     */
    void checkSilence(int peer) {
        if (lastHeardNs.get(peer) != 0) {
            checkSilence(peer, System.nanoTime());
        }
    }

    /** Fails {@code peer} if it has been silent for the timeout; whether this rank lost its driver instead. */
    private boolean checkSilence(int peer, long now) {
        long silentNs = now - lastHeardNs.get(peer);
        if (silentNs <= timeoutNs || transport.peerFailure(peer) != null) {
            return false;
        }
        // A peer heard through the media driver falls silent with it: when the host's driver died (with the rank
        // that ran it), every such peer goes quiet at once, and none of them is to blame.
        if (!context.tcpPeer(peer) && !transport.driverAlive()) {
            transport.driverLost();
            return true;
        }
        transport.failPeer(peer, "silent for " + silentNs / 1_000_000 + " ms (no heartbeat)");
        return false;
    }

    private void drop(Session s, String why) {
        drop(s, why, false);
    }

    /**
     * Drops what a worker that opens its transports one after another leaves behind: counted, and logged at debug
     * only, since it is no sign of trouble.
     */
    private void dropQuietly(Session s, String why) {
        drop(s, why, true);
    }

    private void drop(Session s, String why, boolean expected) {
        dropped.incrementAndGet();
        s.discarding = true;
        // Once per connection at warn: a foreign sender could otherwise flood the log.
        if (!expected && !s.droppedBefore) {
            s.droppedBefore = true;
            LOG.warn("rank {}: dropped a message on connection {}: {} (further drops on it are counted only)",
                    rank, s.sessionId, why);
        } else {
            LOG.debug("rank {}: dropped a message on connection {}: {}", rank, s.sessionId, why);
        }
    }

    private void countCorrupt(Session s, String why) {
        corrupt.incrementAndGet();
        LOG.warn("rank {}: damaged message from rank {}: {}", rank, s.peer, why);
    }
}
