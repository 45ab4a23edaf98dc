package org.attn4j.distributed.transport;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.UnaryOperator;
import java.util.concurrent.CompletableFuture;

import org.attn4j.distributed.testing.Ranks;

/**
 * P ranks of one transport kind inside the test JVM: in-JVM, or Aeron on distinct loopback ports, either over IPC
 * through one media driver for the job (the default for ranks on one host), or over UDP or TCP with one driver
 * per rank. Gives the conformance suite the fault hooks each kind has (kill, corrupt, stall, an
 * intruder, a rank started late), some package-private in {@link AeronTransport}, hence here and not in
 * {@link Ranks}, which runs bodies on P ranks.
 */
final class TestCluster implements AutoCloseable {

    /** The transport implementations under test. */
    enum Kind {
        IN_JVM, AERON_IPC, AERON_UDP, AERON_TCP
    }

    /** The protocol a kind uses to peers it does not reach over IPC. */
    private static AeronTransportContext.Network network(Kind kind) {
        return kind == Kind.AERON_TCP ? AeronTransportContext.Network.TCP : AeronTransportContext.Network.UDP;
    }

    private final Kind kind;
    private final Transport[] ranks;
    private final AeronTransportContext[] contexts;
    private final List<Transport> extras = new ArrayList<>();
    private String spareEndpoint;

    private TestCluster(Kind kind, int worldSize) {
        this.kind = kind;
        this.ranks = new Transport[worldSize];
        this.contexts = new AeronTransportContext[worldSize];
    }

    /** Starts every rank. */
    static TestCluster start(Kind kind, int worldSize, Duration timeout) {
        return start(kind, worldSize, timeout, -1);
    }

    /**
     * Starts every rank but {@code lateRank} (-1: none), which {@link #startLate} starts; the in-JVM kind has no
     * start-up and starts it at once.
     */
    static TestCluster start(Kind kind, int worldSize, Duration timeout, int lateRank) {
        return start(kind, worldSize, timeout, lateRank, false);
    }

    /** As {@link #start(Kind, int, Duration, int)}; {@code ipcChecksums} checksums IPC payloads too. */
    static TestCluster start(Kind kind, int worldSize, Duration timeout, int lateRank, boolean ipcChecksums) {
        return start(kind, worldSize, timeout, lateRank, b -> b.ipcChecksums(ipcChecksums));
    }

    /** Starts every rank, each Aeron rank's context built with {@code settings} applied last. */
    static TestCluster start(Kind kind, int worldSize, Duration timeout,
                             UnaryOperator<AeronTransportContext.Builder> settings) {
        return start(kind, worldSize, timeout, -1, settings);
    }

    static TestCluster start(Kind kind, int worldSize, Duration timeout, int lateRank,
                                     UnaryOperator<AeronTransportContext.Builder> settings) {
        TestCluster c = new TestCluster(kind, worldSize);
        if (kind == Kind.IN_JVM) {
            List<InJvmTransport> group = InJvmTransport.group(worldSize, timeout);
            for (int r = 0; r < worldSize; r++) {
                c.ranks[r] = group.get(r);
            }
            return c;
        }
        List<String> endpoints = Ranks.freeLoopbackEndpoints(worldSize + 1);
        String token = UUID.randomUUID().toString();
        try {
            for (int r = 0; r < worldSize; r++) {
                c.contexts[r] = settings.apply(AeronTransportContext.builder().rank(r)
                        .endpoints(endpoints.subList(0, worldSize)).jobToken(token).timeout(timeout)
                        .sameHostIpc(kind == Kind.AERON_IPC).network(network(kind))).build();
                if (r != lateRank) {
                    c.ranks[r] = new AeronTransport(c.contexts[r]);
                }
            }
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
        c.spareEndpoint = endpoints.get(worldSize);
        return c;
    }

    /** Starts the rank left out by {@link #start(Kind, int, Duration, int)}. */
    void startLate(int rank) {
        if (ranks[rank] == null) {
            ranks[rank] = new AeronTransport(contexts[rank]);
        }
    }

    Kind kind() {
        return kind;
    }

    /** Whether the kind has a wire (checksums, tokens, a receiver thread). */
    boolean onWire() {
        return kind != Kind.IN_JVM;
    }

    Transport rank(int r) {
        return ranks[r];
    }

    int worldSize() {
        return ranks.length;
    }

    /** Crashes rank {@code r} without a goodbye. */
    void kill(int r) {
        if (ranks[r] instanceof InJvmTransport t) {
            t.kill();
        } else {
            ((AeronTransport) ranks[r]).kill();
        }
    }

    void corruptNextChunk(int from, int to) {
        ((AeronTransport) ranks[from]).corruptNextChunk(to);
    }

    void stallReceiver(int r, Duration d) {
        if (ranks[r] instanceof AeronTransport t) {
            t.stallReceiver(d);
        }
    }

    AeronTransport aeron(int r) {
        return (AeronTransport) ranks[r];
    }

    /**
     * An Aeron transport of another job (its own token) that claims {@code claimedRank} and sends to this
     * cluster's endpoints from a spare port.
     */
    AeronTransport intruder(int claimedRank) {
        List<String> endpoints = new ArrayList<>(contexts[0].endpoints());
        endpoints.set(claimedRank, spareEndpoint);
        // Over the network: a transport of another job cannot reach this job's host driver (its directory is named
        // after the job), so UDP (or TCP, where the cluster listens on it) is the way in.
        AeronTransport t = new AeronTransport(AeronTransportContext.builder().rank(claimedRank).endpoints(endpoints)
                .jobToken("not-the-job-token-at-all").timeout(contexts[0].timeout()).sameHostIpc(false)
                .network(network(kind)).build());
        extras.add(t);
        return t;
    }

    /** Closes every rank, in parallel (each waits briefly for its goodbyes to leave). */
    @Override
    public void close() {
        List<CompletableFuture<Void>> closing = new ArrayList<>();
        List<Transport> all = new ArrayList<>(extras);
        for (Transport t : ranks) {
            if (t != null) {
                all.add(t);
            }
        }
        for (Transport t : all) {
            closing.add(CompletableFuture.runAsync(t::close));
        }
        CompletableFuture.allOf(closing.toArray(new CompletableFuture<?>[0])).join();
    }
}
