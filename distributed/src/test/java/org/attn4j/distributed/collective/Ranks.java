package org.attn4j.distributed.collective;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.distributed.transport.AeronTransportContext;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Runs one function per rank, each on its own thread, over an in-JVM group of transports. */
final class Ranks {

    private Ranks() {
    }

    /** P in-JVM transports with a short timeout. */
    static Transport[] inJvm(int worldSize) {
        return inJvm(worldSize, Duration.ofSeconds(5));
    }

    /** P in-JVM transports with the given timeout. */
    static Transport[] inJvm(int worldSize, Duration timeout) {
        return InJvmTransport.group(worldSize, timeout).toArray(new Transport[0]);
    }

    /** P Aeron transports in this JVM (one embedded media driver each) over UDP loopback, short timeout. */
    static Transport[] aeron(int worldSize) {
        List<String> endpoints = new ArrayList<>();
        List<java.net.DatagramSocket> held = new ArrayList<>();
        try {
            for (int r = 0; r < worldSize; r++) {
                java.net.DatagramSocket s = new java.net.DatagramSocket(0, java.net.InetAddress.getLoopbackAddress());
                held.add(s);
                endpoints.add("127.0.0.1:" + s.getLocalPort());
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } finally {
            held.forEach(java.net.DatagramSocket::close);
        }
        String token = java.util.UUID.randomUUID().toString();
        Transport[] t = new Transport[worldSize];
        for (int r = 0; r < worldSize; r++) {
            t[r] = new AeronTransport(AeronTransportContext.builder().rank(r).endpoints(endpoints).jobToken(token)
                    .timeout(Duration.ofSeconds(10)).build());
        }
        return t;
    }

    /** Runs {@code body} for every rank at once and returns the results by rank; rethrows the first failure. */
    static <R> List<R> run(Transport[] transports, Function<Transport, R> body) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(transports.length);
        try {
            List<Future<R>> futures = new ArrayList<>();
            for (Transport t : transports) {
                futures.add(pool.submit(() -> body.apply(t)));
            }
            List<R> out = new ArrayList<>();
            for (Future<R> f : futures) {
                try {
                    out.add(f.get(30, TimeUnit.SECONDS));
                } catch (ExecutionException e) {
                    throw e.getCause() instanceof Exception ex ? ex : e;
                }
            }
            return out;
        } finally {
            pool.shutdownNow();
            for (Transport t : transports) {
                t.close();
            }
        }
    }

    /** A seeded Gaussian array, the same in every process. */
    static INDArray gaussian(long seed, DataType type, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(seed).nextGaussian(shape).castTo(type);
    }
}
