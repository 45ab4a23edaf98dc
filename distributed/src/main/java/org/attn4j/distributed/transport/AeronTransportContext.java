package org.attn4j.distributed.transport;

import java.io.File;
import java.io.IOException;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;

import org.attn4j.distributed.launch.WorkerEnvironment;

/**
 * Configuration of one rank's {@link AeronTransport}, validated once when built. Every rank of a job gets the
 * same endpoint list and token and its own rank; the launcher passes them in the environment
 * ({@link #fromEnvironment}).
 *
 * <p>Defaults: bind to loopback, timeout 60 s, heartbeat every min(1 s, timeout / 4), chunks of 1 MiB, terms of
 * 16 MiB, socket buffers and receiver window of 4 MiB, and an embedded media driver unless an Aeron directory is
 * given. The MTU (the largest datagram Aeron sends over UDP) is 65504 when every endpoint is a loopback address,
 * otherwise Aeron's default of 1408, which fits any Ethernet path. Each datagram costs a system call on either
 * side, so jumbo frames carry UDP several times faster: {@link Builder#mtuFromLink} ({@link #ENV_MTU}{@code =link})
 * takes the MTU of this host's network interface that carries this rank's endpoint address, less the IP and UDP
 * headers, rounded down to a multiple of 32 (8960 with 9000-byte jumbo frames; at most the receiver window). Only
 * where every host and switch port on the path has that MTU: Linux sends UDP with the don't-fragment flag, and a
 * switch with a smaller MTU drops such frames without a word, so the peers would connect and no data arrive.
 */
public final class AeronTransportContext {

    private final int rank;
    private final List<String> endpoints;
    private final String bindAddress;
    private final String jobToken;
    private final Duration timeout;
    private final Duration heartbeatInterval;
    private final int maxChunkBytes;
    private final int maxMessageBytes;
    private final int termLength;
    private final int mtu;
    private final int socketBufferBytes;
    private final int receiverWindowBytes;
    private final String aeronDirectory;
    private final int streamId;
    private final Duration idleMaxPark;
    private final Duration lateReceiveWait;
    private final boolean sameHostIpc;
    private final int ipcTermLength;
    private final boolean ipcChecksums;
    private final boolean singleCopy;
    private final ProgressIdle progressIdle;
    private final Network network;

    private AeronTransportContext(Builder b, List<String> endpoints, Duration heartbeat, int mtu) {
        this.rank = b.rank;
        this.endpoints = List.copyOf(endpoints);
        this.bindAddress = b.bindAddress;
        this.jobToken = b.jobToken;
        this.timeout = b.timeout;
        this.heartbeatInterval = heartbeat;
        this.maxChunkBytes = b.maxChunkBytes;
        this.maxMessageBytes = b.maxMessageBytes;
        this.termLength = b.termLength;
        this.mtu = mtu;
        this.socketBufferBytes = b.socketBufferBytes;
        this.receiverWindowBytes = b.receiverWindowBytes;
        this.aeronDirectory = b.aeronDirectory;
        this.streamId = b.streamId;
        this.idleMaxPark = b.idleMaxPark;
        this.lateReceiveWait = b.lateReceiveWait;
        this.sameHostIpc = b.sameHostIpc;
        this.ipcTermLength = b.ipcTermLength;
        this.ipcChecksums = b.ipcChecksums;
        this.singleCopy = b.singleCopy;
        this.network = b.network;
        this.progressIdle = b.progressIdle != null ? b.progressIdle
                : ProgressIdle.defaultFor(Runtime.getRuntime().availableProcessors(), localRanks(this.endpoints, rank));
    }

    /** Environment variable: {@code 0} sends to same-host peers over UDP too (default {@code 1}: Aeron IPC). */
    public static final String ENV_IPC = "ATTN4J_TRANSPORT_IPC";
    /** Environment variable: {@code 1} checksums IPC payloads as well (default {@code 0}). */
    public static final String ENV_IPC_CHECKSUMS = "ATTN4J_TRANSPORT_IPC_CHECKSUMS";
    /**
     * Environment variable: {@code 0} sends large arrays to same-host peers through the shared log instead of
     * letting the receiver copy them from the sender's memory (default {@code 1}).
     */
    public static final String ENV_SINGLE_COPY = "ATTN4J_TRANSPORT_SINGLE_COPY";
    /** Aeron's default MTU, the smallest this transport uses. */
    static final int DEFAULT_MTU = 1408;
    /** Aeron's largest MTU. */
    static final int MAX_MTU = 65504;

    /**
     * Environment variable: the UDP MTU, a multiple of 32 from 1408 to 65504, or {@code link} for the MTU of the
     * rank's network interface ({@link Builder#mtuFromLink}); default 1408 off loopback.
     */
    public static final String ENV_MTU = "ATTN4J_TRANSPORT_MTU";
    /** Environment variable: how the progress thread waits, {@code spin}, {@code yield} or {@code park}. */
    public static final String ENV_IDLE = "ATTN4J_TRANSPORT_IDLE";
    /** Environment variable: the protocol to peers not reached over IPC, {@code tcp} (default) or {@code udp}. */
    public static final String ENV_NETWORK = "ATTN4J_TRANSPORT_NETWORK";

    /** How a rank reaches the peers it does not reach over IPC (other hosts; same-host ones with IPC off). */
    public enum Network {
        /**
         * One TCP connection per direction and pair, records written straight from the array to the socket: the
         * kernel cuts and reassembles segments in bulk (segmentation offload), several times fewer CPU cycles per
         * byte than one datagram per MTU.
         */
        TCP,
        /** Aeron UDP unicast, one datagram per MTU ({@link #ENV_MTU}), flow and loss handled by Aeron. */
        UDP;

        static Network parse(String variable, String value) {
            for (Network n : values()) {
                if (n.name().equalsIgnoreCase(value.trim())) {
                    return n;
                }
            }
            throw new IllegalArgumentException(variable + ": expected tcp or udp, got '" + value + "'");
        }
    }

    /**
     * How the progress thread waits while a send or receive is outstanding (when nothing is outstanding it parks
     * in every mode, up to {@link #idleMaxPark()}).
     */
    public enum ProgressIdle {
        /** Busy-spins ({@code Thread.onSpinWait}): the lowest latency, holds a core while a call waits. */
        SPIN,
        /** Yields the core between polls: near-spin latency while any other thread may still run. */
        YIELD,
        /** Short parks (50 us plus the kernel's timer slack): least CPU, the most latency per hop. */
        PARK;

        /**
         * The default for a host: {@link #SPIN} when every rank on it can have two cores (one for its progress
         * thread, one for its compute), {@link #YIELD} when it can have one, {@link #PARK} when the ranks
         * outnumber the cores (there, a polling thread takes the core another rank computes on: at 4 ranks on 2
         * cores, Ulysses' forward and backward pass took 381 ms parking and 590-801 ms yielding).
         */
        static ProgressIdle defaultFor(int cores, int ranksOnHost) {
            int ranks = Math.max(1, ranksOnHost);
            return cores >= 2 * ranks ? SPIN : cores >= ranks ? YIELD : PARK;
        }

        static ProgressIdle parse(String variable, String value) {
            for (ProgressIdle p : values()) {
                if (p.name().equalsIgnoreCase(value.trim())) {
                    return p;
                }
            }
            throw new IllegalArgumentException(variable + ": expected spin, yield or park, got '" + value + "'");
        }
    }

    /** A builder with the defaults. */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The context a launched worker describes in its environment ({@link WorkerEnvironment}: rank, world size,
     * peers, job token, optional timeout, external driver directory and bind address) and the transport's own
     * variables ({@link Builder#transportSettings}), other settings at their defaults.
     *
     * @param env the variables, e.g. {@code System.getenv()}
     * @throws IllegalArgumentException naming the variable that is missing or malformed
     */
    public static AeronTransportContext fromEnvironment(Map<String, String> env) {
        WorkerEnvironment w = WorkerEnvironment.from(env);
        Builder b = builder().rank(w.rank()).worldSize(w.worldSize())
                .endpoints(w.peers().stream().map(WorkerEnvironment.Endpoint::toString).toList())
                .jobToken(w.jobToken()).timeout(w.timeout());
        w.aeronDir().ifPresent(b::aeronDirectory);
        w.bind().ifPresent(b::bindAddress);
        b.transportSettings(env);
        return b.build();
    }

    private static boolean flag(String variable, String value) {
        return switch (value.trim()) {
            case "1", "true", "on" -> true;
            case "0", "false", "off" -> false;
            default -> throw new IllegalArgumentException(variable + ": expected 1 or 0, got '" + value + "'");
        };
    }

    /** This rank. */
    public int rank() {
        return rank;
    }

    /** The number of ranks. */
    public int worldSize() {
        return endpoints.size();
    }

    /** Every rank's {@code host:port}, index = rank. */
    public List<String> endpoints() {
        return endpoints;
    }

    /** The address this rank receives on. */
    public String bindAddress() {
        return bindAddress;
    }

    /** The job token (never logged; {@link #toString} leaves it out). */
    public String jobToken() {
        return jobToken;
    }

    /** How long a call may wait, and how long a peer may stay silent before it counts as failed. */
    public Duration timeout() {
        return timeout;
    }

    /** How often a rank tells its peers it is alive. */
    public Duration heartbeatInterval() {
        return heartbeatInterval;
    }

    /** Payload bytes per chunk of a large array. */
    public int maxChunkBytes() {
        return maxChunkBytes;
    }

    /** The largest array, in bytes, one message may carry (sent or accepted). */
    public int maxMessageBytes() {
        return maxMessageBytes;
    }

    /** Aeron term buffer length of each publication, bytes. */
    public int termLength() {
        return termLength;
    }

    /** Aeron MTU of each publication, bytes. */
    public int mtu() {
        return mtu;
    }

    /** SO_SNDBUF and SO_RCVBUF of the embedded driver, bytes (the kernel may cap them). */
    public int socketBufferBytes() {
        return socketBufferBytes;
    }

    /** The embedded driver's initial receiver window, bytes. */
    public int receiverWindowBytes() {
        return receiverWindowBytes;
    }

    /** The external media driver's directory, or null for an embedded driver. */
    public String aeronDirectory() {
        return aeronDirectory;
    }

    /** Whether this rank starts its own media driver. */
    public boolean embeddedDriver() {
        return aeronDirectory == null;
    }

    /** The Aeron stream id every rank publishes on. */
    public int streamId() {
        return streamId;
    }

    /** The longest park of an idle transport or embedded-driver thread; bounds the latency added after idling. */
    public Duration idleMaxPark() {
        return idleMaxPark;
    }

    /**
     * How long a large message (64 KiB or more) that no receive waits for yet stays in the log or socket, so that a
     * receive posted meanwhile takes it straight into the caller's array; zero: read every message at once.
     */
    public Duration lateReceiveWait() {
        return lateReceiveWait;
    }

    /** Whether same-host peers talk over Aeron IPC through one media driver per host (default true). */
    public boolean sameHostIpc() {
        return sameHostIpc;
    }

    /** Term length of the IPC publications to same-host peers, bytes. */
    public int ipcTermLength() {
        return ipcTermLength;
    }

    /** Whether DATA over IPC carries a payload checksum (UDP always does). */
    public boolean ipcChecksums() {
        return ipcChecksums;
    }

    /**
     * Whether an array of at least {@link #SINGLE_COPY_MIN_BYTES} to a same-host peer may stay in the sender's
     * memory for the receiver to copy it from there ({@link ProcessMemory}): where the kernel lets the peers read
     * each other's memory, and not with {@link #ipcChecksums()} (a payload read that way carries no checksum).
     */
    public boolean singleCopy() {
        return singleCopy && !ipcChecksums;
    }

    /**
     * The smallest array sent by single copy ({@link #singleCopy()}); smaller ones go through the shared log,
     * where one pass through a hot log costs less than the receiver's release message and system call.
     */
    public static final long SINGLE_COPY_MIN_BYTES = 64 << 10;

    /** How the progress thread waits while calls are outstanding. */
    public ProgressIdle progressIdle() {
        return progressIdle;
    }

    /**
     * Whether {@code peer} runs on this rank's host, as far as the endpoints tell: the same host string, or both
     * loopback addresses.
     */
    public boolean sameHost(int peer) {
        return sameHost(endpoints, rank, peer);
    }

    /** The protocol to peers not reached over IPC. */
    public Network network() {
        return network;
    }

    /** Whether {@code peer} is reached over TCP: not over IPC, not this rank, and {@link #network()} is TCP. */
    public boolean tcpPeer(int peer) {
        return network == Network.TCP && peer != rank && !ipcPeer(peer);
    }

    /** Whether {@code peer} is reached over IPC: same host and {@link #sameHostIpc()}, not this rank itself. */
    public boolean ipcPeer(int peer) {
        return sameHostIpc && peer != rank && sameHost(peer);
    }

    /** The ranks on this rank's host (itself included), by {@link #sameHost}. */
    public int localRanks() {
        return localRanks(endpoints, rank);
    }

    private static int localRanks(List<String> endpoints, int rank) {
        int n = 0;
        for (int p = 0; p < endpoints.size(); p++) {
            n += sameHost(endpoints, rank, p) ? 1 : 0;
        }
        return n;
    }

    private static boolean sameHost(List<String> endpoints, int a, int b) {
        String x = hostOf(endpoints.get(a));
        String y = hostOf(endpoints.get(b));
        return x.equalsIgnoreCase(y) || Builder.isLoopback(x) && Builder.isLoopback(y);
    }

    private static String hostOf(String endpoint) {
        return endpoint.substring(0, endpoint.lastIndexOf(':'));
    }

    /** The host part of {@code rank}'s endpoint (IPv6 in brackets). */
    public String host(int rank) {
        String e = endpoints.get(rank);
        return e.substring(0, e.lastIndexOf(':'));
    }

    /** The port of {@code rank}'s endpoint. */
    public int port(int rank) {
        String e = endpoints.get(rank);
        return Integer.parseInt(e.substring(e.lastIndexOf(':') + 1));
    }

    /** Everything but the token. */
    @Override
    public String toString() {
        return "AeronTransportContext{rank=" + rank + ", endpoints=" + endpoints + ", bind=" + bindAddress
                + ", timeout=" + timeout.toMillis() + " ms, heartbeat=" + heartbeatInterval.toMillis()
                + " ms, chunk=" + maxChunkBytes + ", term=" + termLength + ", mtu=" + mtu
                + ", driver=" + (aeronDirectory == null ? "embedded" : aeronDirectory)
                + ", ipc=" + (sameHostIpc ? "same-host" : "off") + (ipcChecksums ? " checksummed" : "")
                + (sameHostIpc && singleCopy() ? " single-copy" : "")
                + ", network=" + network.name().toLowerCase(java.util.Locale.ROOT)
                + ", idle=" + progressIdle.name().toLowerCase(java.util.Locale.ROOT) + "}";
    }

    private static String required(Map<String, String> env, String name) {
        String v = env.get(name);
        if (v == null || v.isBlank()) {
            throw new IllegalArgumentException("AeronTransportContext: environment variable " + name + " is not set");
        }
        return v.trim();
    }


    /** Builds an {@link AeronTransportContext}; {@link #build} validates. */
    public static final class Builder {
        private int rank = -1;
        private int worldSize = -1;
        private List<String> endpoints;
        private String bindAddress = "127.0.0.1";
        private String jobToken;
        private Duration timeout = Duration.ofSeconds(60);
        private Duration heartbeatInterval;
        private int maxChunkBytes = 1 << 20;
        private int maxMessageBytes = Integer.MAX_VALUE;
        private int termLength = 16 << 20;
        private int mtu;
        private boolean mtuFromLink;
        private int socketBufferBytes = 4 << 20;
        private int receiverWindowBytes = 4 << 20;
        private String aeronDirectory;
        private int streamId = 10_001;
        private Duration idleMaxPark = Duration.ofMillis(1);
        private Duration lateReceiveWait = Duration.ofMillis(5);
        private boolean sameHostIpc = true;
        private int ipcTermLength = 8 << 20;
        private boolean ipcChecksums;
        private boolean singleCopy = true;
        private ProgressIdle progressIdle;
        private Network network = Network.TCP;

        private Builder() {
        }

        /** This rank, {@code 0 <= rank < worldSize}. Required. */
        public Builder rank(int rank) {
            this.rank = rank;
            return this;
        }

        /** The number of ranks; optional, checked against the endpoint count when given. */
        public Builder worldSize(int worldSize) {
            this.worldSize = worldSize;
            return this;
        }

        /** Every rank's {@code host:port} (IPv6 as {@code [addr]:port}), index = rank. Required. */
        public Builder endpoints(List<String> endpoints) {
            this.endpoints = endpoints == null ? null : new ArrayList<>(endpoints);
            return this;
        }

        /**
         * The address to receive on; default {@code 127.0.0.1}. Use {@code 0.0.0.0} or an interface address to
         * accept peers on other hosts.
         */
        public Builder bindAddress(String bindAddress) {
            this.bindAddress = bindAddress;
            return this;
        }

        /** The job token shared by every rank; required, {@link WorkerEnvironment#MIN_TOKEN_LENGTH}+ characters. */
        public Builder jobToken(String jobToken) {
            this.jobToken = jobToken;
            return this;
        }

        /** The call timeout; default 60 s. */
        public Builder timeout(Duration timeout) {
            this.timeout = timeout;
            return this;
        }

        /** The heartbeat interval; default min(1 s, timeout / 4); must be below timeout / 2. */
        public Builder heartbeatInterval(Duration heartbeatInterval) {
            this.heartbeatInterval = heartbeatInterval;
            return this;
        }

        /** Payload bytes per chunk; default 1 MiB; header plus chunk must fit termLength / 8. */
        public Builder maxChunkBytes(int maxChunkBytes) {
            this.maxChunkBytes = maxChunkBytes;
            return this;
        }

        /** The largest array per message, bytes; default and maximum {@code Integer.MAX_VALUE}. */
        public Builder maxMessageBytes(int maxMessageBytes) {
            this.maxMessageBytes = maxMessageBytes;
            return this;
        }

        /**
         * Applies the transport's environment variables that are set in {@code env}: {@link #ENV_IPC},
         * {@link #ENV_IPC_CHECKSUMS}, {@link #ENV_SINGLE_COPY}, {@link #ENV_IDLE}, {@link #ENV_MTU} and {@link #ENV_NETWORK} (launched workers and Spark tasks
         * read them from their process's environment).
         *
         * @throws IllegalArgumentException naming the variable that is malformed
         */
        public Builder transportSettings(Map<String, String> env) {
            String ipc = env.get(ENV_IPC);
            if (ipc != null && !ipc.isBlank()) {
                sameHostIpc(flag(ENV_IPC, ipc));
            }
            String checksums = env.get(ENV_IPC_CHECKSUMS);
            if (checksums != null && !checksums.isBlank()) {
                ipcChecksums(flag(ENV_IPC_CHECKSUMS, checksums));
            }
            String single = env.get(ENV_SINGLE_COPY);
            if (single != null && !single.isBlank()) {
                singleCopy(flag(ENV_SINGLE_COPY, single));
            }
            String datagram = env.get(ENV_MTU);
            if (datagram != null && !datagram.isBlank()) {
                if (datagram.trim().equalsIgnoreCase("link")) {
                    mtuFromLink();
                } else {
                    int bytes;
                    try {
                        bytes = Integer.parseInt(datagram.trim());
                    } catch (NumberFormatException e) {
                        bytes = 0;
                    }
                    if (bytes <= 0) {
                        throw new IllegalArgumentException(ENV_MTU + ": expected a number of bytes or 'link', got '"
                                + datagram + "'");
                    }
                    mtu(bytes);
                }
            }
            String idle = env.get(ENV_IDLE);
            if (idle != null && !idle.isBlank()) {
                progressIdle(ProgressIdle.parse(ENV_IDLE, idle));
            }
            String network = env.get(ENV_NETWORK);
            if (network != null && !network.isBlank()) {
                network(Network.parse(ENV_NETWORK, network));
            }
            return this;
        }

        /** Aeron term length, a power of two from 64 KiB to 1 GiB; default 16 MiB. */
        public Builder termLength(int termLength) {
            this.termLength = termLength;
            return this;
        }

        /** Aeron MTU, a multiple of 32 from 1408 to 65504; default by endpoint (see the class comment). */
        public Builder mtu(int mtu) {
            this.mtu = mtu;
            return this;
        }

        /**
         * The MTU of the network interface that carries this rank's endpoint address, less the IP and UDP
         * headers, rounded down to a multiple of 32 and at most the receiver window (1408 when no local interface
         * has that address, 65504 when every endpoint is a loopback address); for networks whose every host and
         * switch port has that MTU (see the class comment). An explicit {@link #mtu} wins.
         */
        public Builder mtuFromLink() {
            this.mtuFromLink = true;
            return this;
        }

        /** SO_SNDBUF / SO_RCVBUF for the embedded driver; default 4 MiB. */
        public Builder socketBufferBytes(int socketBufferBytes) {
            this.socketBufferBytes = socketBufferBytes;
            return this;
        }

        /**
         * Initial receiver window of the embedded driver; default 4 MiB; at most termLength / 2 and at most the
         * socket buffer (Aeron also checks it against what the kernel grants, {@code net.core.rmem_max}).
         */
        public Builder receiverWindowBytes(int receiverWindowBytes) {
            this.receiverWindowBytes = receiverWindowBytes;
            return this;
        }

        /** An external media driver's directory; default none (embedded driver). */
        public Builder aeronDirectory(String aeronDirectory) {
            this.aeronDirectory = aeronDirectory;
            return this;
        }

        /** The Aeron stream id; default 10001. */
        public Builder streamId(int streamId) {
            this.streamId = streamId;
            return this;
        }

        /** The longest idle park of transport and embedded-driver threads; default 1 ms. */
        public Builder idleMaxPark(Duration idleMaxPark) {
            this.idleMaxPark = idleMaxPark;
            return this;
        }

        /**
         * How long a large message that no receive waits for yet stays unread (see {@link #lateReceiveWait()});
         * default 5 ms, zero to read every message at once. Messages behind it from the same peer wait as long at
         * most, once per peer until a receive is found waiting again.
         */
        public Builder lateReceiveWait(Duration lateReceiveWait) {
            this.lateReceiveWait = lateReceiveWait;
            return this;
        }

        /** Same-host peers over Aeron IPC through one media driver per host; default true. */
        public Builder sameHostIpc(boolean sameHostIpc) {
            this.sameHostIpc = sameHostIpc;
            return this;
        }

        /** Term length of IPC publications, a power of two from 64 KiB to 1 GiB; default 8 MiB. */
        public Builder ipcTermLength(int ipcTermLength) {
            this.ipcTermLength = ipcTermLength;
            return this;
        }

        /** Checksums on IPC payloads too; default false (a shared-memory log cannot damage bytes in transit). */
        public Builder ipcChecksums(boolean ipcChecksums) {
            this.ipcChecksums = ipcChecksums;
            return this;
        }

        /**
         * Whether a large array to a same-host peer may be copied by the receiver straight from the sender's
         * memory; default true ({@link AeronTransportContext#singleCopy()}).
         */
        public Builder singleCopy(boolean singleCopy) {
            this.singleCopy = singleCopy;
            return this;
        }

        /** The protocol to peers not reached over IPC; default TCP. */
        public Builder network(Network network) {
            this.network = java.util.Objects.requireNonNull(network, "network");
            return this;
        }

        /** How the progress thread waits while calls are outstanding; default by cores per rank on the host. */
        public Builder progressIdle(ProgressIdle progressIdle) {
            this.progressIdle = progressIdle;
            return this;
        }

        /**
         * Validates and builds.
         *
         * @throws IllegalArgumentException naming the setting and its offending value
         */
        public AeronTransportContext build() {
            if (endpoints == null || endpoints.isEmpty()) {
                throw bad("endpoints are missing; give every rank's host:port, index = rank");
            }
            List<String> trimmed = new ArrayList<>();
            for (String e : endpoints) {
                trimmed.add(checkEndpoint(e == null ? "" : e.trim()));
            }
            if (new HashSet<>(trimmed).size() != trimmed.size()) {
                throw bad("endpoints " + trimmed + " repeat an endpoint; every rank needs its own host:port");
            }
            if (worldSize != -1 && worldSize != trimmed.size()) {
                throw bad("world size is " + worldSize + " but " + trimmed.size() + " endpoints are given");
            }
            if (rank < 0 || rank >= trimmed.size()) {
                throw bad("rank " + rank + " is outside [0, " + trimmed.size() + ")");
            }
            if (bindAddress == null || bindAddress.isBlank()) {
                throw bad("bind address is empty");
            }
            if (jobToken == null || jobToken.strip().length() < WorkerEnvironment.MIN_TOKEN_LENGTH) {
                throw bad("job token has " + (jobToken == null ? 0 : jobToken.strip().length()) + " characters; "
                        + "every rank of a job needs the same token of at least " + WorkerEnvironment.MIN_TOKEN_LENGTH
                        + " (e.g. a random UUID)");
            }
            if (timeout == null || timeout.isNegative() || timeout.isZero()) {
                throw bad("timeout is " + timeout + "; it must be positive");
            }
            Duration heartbeat = heartbeatInterval != null ? heartbeatInterval
                    : min(Duration.ofSeconds(1), timeout.dividedBy(4));
            if (heartbeat.isNegative() || heartbeat.isZero() || heartbeat.compareTo(timeout.dividedBy(2)) >= 0) {
                throw bad("heartbeat interval is " + heartbeat.toMillis() + " ms; it must be positive and below half"
                        + " the timeout of " + timeout.toMillis() + " ms");
            }
            if (Integer.bitCount(termLength) != 1 || termLength < (64 << 10) || termLength > (1 << 30)) {
                throw bad("term length is " + termLength + "; it must be a power of two from 65536 to 2^30");
            }
            if (Integer.bitCount(ipcTermLength) != 1 || ipcTermLength < (64 << 10) || ipcTermLength > (1 << 30)) {
                throw bad("IPC term length is " + ipcTermLength + "; it must be a power of two from 65536 to 2^30");
            }
            int maxMessage = termLength / 8;
            if (maxChunkBytes < 1 || maxChunkBytes + MessageDescriptor.MAX_HEADER_LENGTH > maxMessage) {
                throw bad("max chunk bytes is " + maxChunkBytes + "; it must be positive and at most "
                        + (maxMessage - MessageDescriptor.MAX_HEADER_LENGTH) + " (term length / 8 less the header)");
            }
            if (maxMessageBytes < 0) {
                throw bad("max message bytes is " + maxMessageBytes + "; it must not be negative");
            }
            int effectiveMtu = mtu != 0 ? mtu : allLoopback(trimmed) ? MAX_MTU
                    : !mtuFromLink || isLoopback(hostOf(trimmed.get(rank))) ? DEFAULT_MTU
                    : Math.max(DEFAULT_MTU, Math.min(linkMtu(hostOf(trimmed.get(rank))), receiverWindowBytes & ~31));
            if (effectiveMtu % 32 != 0 || effectiveMtu < DEFAULT_MTU || effectiveMtu > MAX_MTU) {
                throw bad("mtu is " + effectiveMtu + "; it must be a multiple of 32 from " + DEFAULT_MTU + " to "
                        + MAX_MTU);
            }
            if (socketBufferBytes < 0) {
                throw bad("socket buffer bytes is " + socketBufferBytes + "; it must not be negative (0: OS default)");
            }
            if (receiverWindowBytes < effectiveMtu || receiverWindowBytes > termLength / 2) {
                throw bad("receiver window is " + receiverWindowBytes + " bytes; it must be from the mtu ("
                        + effectiveMtu + ") to half the term length (" + termLength / 2 + ")");
            }
            // Aeron refuses a window above the socket's receive buffer (as the kernel grants it: net.core.rmem_max).
            if (socketBufferBytes > 0 && receiverWindowBytes > socketBufferBytes) {
                throw bad("receiver window is " + receiverWindowBytes + " bytes, more than the socket buffer of "
                        + socketBufferBytes + " bytes");
            }
            if (aeronDirectory != null && (aeronDirectory.isBlank() || !new File(aeronDirectory).isDirectory())) {
                throw bad("Aeron directory '" + aeronDirectory + "' is not a directory; start the media driver"
                        + " first or leave it unset for an embedded driver");
            }
            if (lateReceiveWait == null || lateReceiveWait.isNegative() || lateReceiveWait.compareTo(timeout) >= 0) {
                throw bad("late receive wait is " + lateReceiveWait + "; it must be zero or positive and shorter "
                        + "than the timeout (" + timeout + ")");
            }
            if (idleMaxPark == null || idleMaxPark.isNegative() || idleMaxPark.isZero()
                    || idleMaxPark.compareTo(heartbeat) > 0) {
                throw bad("idle max park is " + idleMaxPark + "; it must be positive and at most the heartbeat");
            }
            return new AeronTransportContext(this, trimmed, heartbeat, effectiveMtu);
        }

        private static String checkEndpoint(String e) {
            int colon = e.lastIndexOf(':');
            String host = colon < 0 ? "" : e.substring(0, colon);
            int port;
            try {
                port = Integer.parseInt(e.substring(colon + 1));
            } catch (NumberFormatException ex) {
                port = -1;
            }
            boolean bareIpv6 = host.contains(":") && !(host.startsWith("[") && host.endsWith("]"));
            if (host.isEmpty() || bareIpv6 || port < 1 || port > 65535) {
                throw bad("endpoint '" + e + "' is not host:port (IPv6 as [addr]:port, port 1 to 65535)");
            }
            return e;
        }

        /**
         * The UDP MTU for the link that carries {@code host}'s address on this machine: the interface's MTU less
         * the IPv4 (20) or IPv6 (40) and UDP (8) headers, rounded down to a multiple of 32, from 1408 to 65504;
         * 1408 (Aeron's default) when no local interface has that address.
         */
        static int linkMtu(String host) {
            try {
                InetAddress address = InetAddress.getByName(host.startsWith("[") ? host.substring(1, host.length() - 1)
                        : host);
                NetworkInterface nic = NetworkInterface.getByInetAddress(address);
                if (nic == null || nic.getMTU() <= 0) {
                    return DEFAULT_MTU;
                }
                return udpMtu(nic.getMTU(), address instanceof Inet6Address);
            } catch (IOException e) {
                return DEFAULT_MTU;
            }
        }

        /** The Aeron MTU for a link of {@code linkMtu} bytes (see {@link #linkMtu}). */
        static int udpMtu(int linkMtu, boolean ipv6) {
            int payload = linkMtu - (ipv6 ? 40 : 20) - 8;
            return Math.max(DEFAULT_MTU, Math.min(MAX_MTU, payload & ~31));
        }

        private static boolean allLoopback(List<String> endpoints) {
            for (String e : endpoints) {
                if (!isLoopback(e.substring(0, e.lastIndexOf(':')))) {
                    return false;
                }
            }
            return true;
        }

        static boolean isLoopback(String host) {
            return host.startsWith("127.") || host.equalsIgnoreCase("localhost") || host.equals("[::1]");
        }

        private static Duration min(Duration a, Duration b) {
            return a.compareTo(b) <= 0 ? a : b;
        }

        private static IllegalArgumentException bad(String what) {
            return new IllegalArgumentException("AeronTransportContext: " + what);
        }
    }
}
