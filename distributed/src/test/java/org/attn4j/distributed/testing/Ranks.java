package org.attn4j.distributed.testing;

import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import org.attn4j.distributed.launch.FreePorts;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.distributed.transport.AeronTransportContext;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;

/**
 * P ranks inside the test JVM, one transport each, and a body run once per rank on its own thread: the harness of
 * the multi-rank tests. The transports are in-JVM ({@link #inJvm}) or Aeron over UDP loopback with one embedded
 * media driver per rank ({@link #aeron}).
 *
 * <p>{@link #run} returns the bodies' results by rank. Nothing hangs: it waits at most the given time for all of
 * them and fails naming the ranks still running; a failed rank is reported at once (the others would only wait on
 * it until their transports time out), naming that rank, and the rank threads are interrupted either way.
 *
 * <pre>{@code
 * List<INDArray> out = Ranks.runInJvm(4, Duration.ofSeconds(20), Duration.ofSeconds(60), t -> work(t));
 *
 * try (Ranks ranks = Ranks.inJvm(6, Duration.ofSeconds(5))) {     // transports closed at the end
 *     assertThrows(IllegalArgumentException.class, () -> new Algorithm(ranks.transport(0), ...));
 * }
 * }</pre>
 */
public final class Ranks implements AutoCloseable {

    /** One rank's part of a test, given that rank's transport. */
    @FunctionalInterface
    public interface Body<R> {
        R run(Transport t) throws Exception;
    }

    /** How long {@link #close} waits for the threads of a run whose ranks are still running. */
    private static final Duration THREADS_END = Duration.ofSeconds(30);

    private final List<Transport> transports;
    /** The threads of every {@link #run}: {@link #close} lets none outlive it. */
    private final List<ExecutorService> pools = new ArrayList<>();

    private Ranks(List<? extends Transport> transports) {
        this.transports = List.copyOf(transports);
    }

    /** {@code p} in-JVM transports whose receives fail after {@code timeout}. */
    public static Ranks inJvm(int p, Duration timeout) {
        return new Ranks(InJvmTransport.group(p, timeout));
    }

    /**
     * {@code p} Aeron transports in this JVM, one embedded media driver each, on loopback ports that were free a
     * moment ago, with a fresh job token; receives fail after {@code timeout}.
     */
    public static Ranks aeron(int p, Duration timeout) {
        List<String> endpoints = freeLoopbackEndpoints(p);
        String token = UUID.randomUUID().toString();
        // The transport's variables, as a launched worker reads them: ATTN4J_TRANSPORT_IPC=0 puts the same ranks
        // on the network path (ATTN4J_TRANSPORT_NETWORK: TCP or UDP loopback).
        List<Transport> t = new ArrayList<>();
        try {
            for (int r = 0; r < p; r++) {
                t.add(new AeronTransport(AeronTransportContext.builder().rank(r).endpoints(endpoints).jobToken(token)
                        .timeout(timeout).transportSettings(System.getenv()).build()));
            }
        } catch (RuntimeException e) {
            new Ranks(t).close();
            throw e;
        }
        return new Ranks(t);
    }

    /**
     * Runs {@code body} on {@code p} fresh in-JVM ranks at once and closes their transports.
     *
     * @param timeout the transports' receive timeout
     * @param wait    how long to wait for every rank, at most
     * @see #run
     */
    public static <R> List<R> runInJvm(int p, Duration timeout, Duration wait, Body<R> body)
            throws ExecutionException, TimeoutException, InterruptedException {
        try (Ranks ranks = inJvm(p, timeout)) {
            return ranks.run(wait, body);
        }
    }

    /** The number of ranks. */
    public int size() {
        return transports.size();
    }

    /** Every rank's transport, by rank. */
    public List<Transport> transports() {
        return transports;
    }

    /** Rank {@code r}'s transport. */
    public Transport transport(int r) {
        return transports.get(r);
    }

    /**
     * Runs {@code body} for every rank at once, each on its own thread with its own transport.
     *
     * @return the results by rank (null where a body returned null)
     * @throws ExecutionException   the first rank to fail: its message names the rank, its cause is what the body
     *                              threw
     * @throws TimeoutException     some rank still ran after {@code wait}; the message names them
     */
    public <R> List<R> run(Duration wait, Body<R> body)
            throws ExecutionException, TimeoutException, InterruptedException {
        int p = transports.size();
        ExecutorService pool = Executors.newFixedThreadPool(p, task -> {
            Thread t = new Thread(task);
            t.setDaemon(true);                                      // a rank that ignores interrupts ends with the JVM
            return t;
        });
        pools.add(pool);
        ExecutorCompletionService<R> done = new ExecutorCompletionService<>(pool);
        List<Future<R>> futures = new ArrayList<>();
        try {
            for (int r = 0; r < p; r++) {
                Transport t = transports.get(r);
                String name = "rank-" + r;
                futures.add(done.submit(() -> {
                    Thread.currentThread().setName(name);
                    return body.run(t);
                }));
            }
            List<R> results = new ArrayList<>(Collections.nCopies(p, null));
            long deadline = System.nanoTime() + wait.toNanos();
            for (int finished = 0; finished < p; finished++) {
                Future<R> f = done.poll(deadline - System.nanoTime(), TimeUnit.NANOSECONDS);
                if (f == null) {
                    String running = IntStream.range(0, p).filter(r -> !futures.get(r).isDone())
                            .mapToObj(Integer::toString).collect(Collectors.joining(", "));
                    throw new TimeoutException("ranks " + running + " of " + p + " still running after "
                            + wait.toMillis() + " ms");
                }
                int rank = futures.indexOf(f);
                try {
                    results.set(rank, f.get());
                } catch (ExecutionException e) {
                    throw new ExecutionException("rank " + rank + " of " + p + " failed: " + e.getCause(),
                            e.getCause());
                }
            }
            return results;
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * Closes every rank's transport, then waits (up to {@link #THREADS_END}) for the ranks of a run that failed or
     * timed out to end: a rank still waiting on a peer fails once the transports close, and none goes on writing
     * files the test is about to delete. The first failure to close is thrown after all were tried.
     */
    @Override
    public void close() {
        RuntimeException failure = null;
        for (Transport t : transports) {
            try {
                t.close();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        long deadline = System.nanoTime() + THREADS_END.toNanos();
        for (ExecutorService pool : pools) {
            try {
                pool.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /**
     * {@code n} loopback endpoints ({@code 127.0.0.1:port}) on ports that were free for UDP and TCP a moment ago
     * (below the ephemeral range: no connection's local port takes one in the meantime).
     */
    public static List<String> freeLoopbackEndpoints(int n) {
        List<String> endpoints = new ArrayList<>();
        for (int port : FreePorts.udp(InetAddress.getLoopbackAddress(), n)) {
            endpoints.add("127.0.0.1:" + port);
        }
        return endpoints;
    }
}
