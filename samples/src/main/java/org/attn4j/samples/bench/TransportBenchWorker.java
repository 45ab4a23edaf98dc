package org.attn4j.samples.bench;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.distributed.transport.Transport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One worker of {@code attn4j bench transport}, started by {@link TransportBenchCommand} through the local
 * launcher. {@code p2p SIZES REPEATS} (2 workers): ping-pong latency and streaming bandwidth of float32 arrays of
 * each size in bytes (latency over at least 200 round trips, its median and 99th percentile; bandwidth one way, and
 * both ways at once); {@code ring SIZES REPEATS} (P workers): ring all-gather and reduce-scatter of arrays of each
 * total size. Rank 0 prints one {@code RESULT kind,workers,bytes,median_us,gb_per_s,bus_gb_per_s,p99_us} line per
 * measurement (GB = 10^9 bytes). A fourth argument gives the shortest untimed warm-up in seconds: before the
 * point-to-point measurements, and before each ring size (longer while the JIT is still compiling: {@link #untimed}).
 */
public final class TransportBenchWorker {

    /** The prefix of result lines. */
    static final String RESULT = "RESULT ";
    /** Rank 0's line naming its transport's UDP MTU (the largest datagram it sends to another host). */
    static final String MTU = "UDP-MTU ";

    private static final int DATA = 1;
    private static final int ACK = 2;
    /** Bytes streamed per bandwidth measurement, at least 4 messages. */
    private static final long STREAM_BYTES = 64L << 20;
    /** The share of a second's wall time the JIT compiler may take and the JVM still count as warm. */
    private static final double JIT_BUSY = 0.02;
    /** The longest warm-up before a size, in multiples of the shortest, however busy the compiler. */
    private static final double WARM_UP_CAP = 10;

    private TransportBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        long[] sizes = Arrays.stream(args[1].split(",")).mapToLong(Long::parseLong).toArray();
        int repeats = Integer.parseInt(args[2]);
        double warmUpSeconds = Double.parseDouble(args[3]);
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            Communicator world = Communicator.world(t);
            if (t.rank() == 0) {
                System.out.println(MTU + t.context().mtu());
            }
            world.barrier();                                      // every connection up before the first clock
            if (args[0].equals("p2p")) {
                warmUp(world, Math.min(sizes[0], 1L << 20), warmUpSeconds);
            }
            if (args[0].equals("p2p")) {
                for (long size : sizes) {
                    pointToPoint(t, size, repeats);
                }
            } else {
                List<RingArrays> arrays = new ArrayList<>();
                for (long size : sizes) {
                    arrays.add(new RingArrays(world, size));
                }
                // Every size in turn first, so the JIT compiles the paths of all of them before any is timed (a
                // size first met later would recompile code the earlier sizes settled).
                untimed(world, warmUpSeconds, () -> arrays.forEach(a -> a.round(world)));
                for (RingArrays a : arrays) {
                    ring(world, a, repeats, warmUpSeconds);
                    a.close();
                }
            }
            world.barrier();
        }
        System.out.flush();
    }

    private static void pointToPoint(Transport t, long bytes, int repeats) {
        INDArray a = Nd4j.ones(DataType.FLOAT, bytes / 4);
        int peer = 1 - t.rank();
        // Enough round trips for a stable 99th percentile (at least 200 after warming up), within ~64 MB each way.
        int trips = (int) Math.max(Math.max(repeats, 200), Math.min(2000, STREAM_BYTES / bytes));
        double[] rtt = new double[trips];
        for (int r = -trips / 10 - 2; r < trips; r++) {           // untimed rounds first
            long t0 = System.nanoTime();
            pingPong(t, peer, a);
            if (r >= 0) {
                rtt[r] = (System.nanoTime() - t0) / 1e3;
            }
        }
        double halfRtt = median(rtt) / 2;
        double p99 = percentile(rtt, 0.99) / 2;
        report(t, "p2p-latency", 2, bytes, halfRtt, bytes / halfRtt / 1e3, Double.NaN, p99);

        int messages = (int) Math.max(4, Math.min(2048, STREAM_BYTES / bytes));
        double[] us = new double[repeats];
        double[] both = new double[repeats];
        for (int r = -3; r < repeats; r++) {
            long t0 = System.nanoTime();
            if (t.rank() == 0) {
                stream(t, peer, a, messages);
                t.receive(peer, ACK).join().close();
            } else {
                drain(t, peer, messages);
                t.send(peer, ACK, Nd4j.zeros(DataType.FLOAT, 1)).join();
            }
            if (r >= 0) {
                us[r] = (System.nanoTime() - t0) / 1e3;
            }
            // Both ranks stream to each other at once, as every member of a ring step does.
            t.send(peer, ACK, Nd4j.zeros(DataType.FLOAT, 1)).join();
            t.receive(peer, ACK).join().close();
            t0 = System.nanoTime();
            List<CompletableFuture<INDArray>> got = new ArrayList<>();
            for (int m = 0; m < messages; m++) {
                got.add(t.receive(peer, DATA));
            }
            stream(t, peer, a, messages);
            got.forEach(f -> f.join().close());
            if (r >= 0) {
                both[r] = (System.nanoTime() - t0) / 1e3;
            }
        }
        double perMessage = median(us) / messages;
        report(t, "p2p-bandwidth", 2, bytes, perMessage, bytes / perMessage / 1e3, Double.NaN, Double.NaN);
        double perMessageBoth = median(both) / messages;
        report(t, "p2p-both", 2, bytes, perMessageBoth, bytes / perMessageBoth / 1e3, Double.NaN, Double.NaN);
        a.close();
    }

    /**
     * Runs ping-pongs untimed for {@code seconds}, so the JIT has compiled the transport's paths before the first
     * clock.
     */
    private static void warmUp(Communicator world, long bytes, double seconds) {
        Transport t = world.transport();
        INDArray a = Nd4j.ones(DataType.FLOAT, Math.max(1, bytes / 4));
        untimed(world, seconds, () -> pingPong(t, 1 - t.rank(), a));
        a.close();
    }

    /**
     * Runs {@code call} for at least {@code seconds}, and then on while the JIT is still compiling on any rank (its
     * compiler took more than {@link #JIT_BUSY} of the last second), for at most {@link #WARM_UP_CAP} times
     * {@code seconds} in all: with four workers on two cores, the compiler threads still took 10-40 % of the CPU a
     * minute after the workers started. Every rank runs the same number of calls (the ranks agree each round whether
     * to go on).
     */
    private static void untimed(Communicator world, double seconds, Runnable call) {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        boolean timed = jit != null && jit.isCompilationTimeMonitoringSupported();
        long start = System.nanoTime();
        long windowStart = start;
        long compiledAtWindowStart = timed ? jit.getTotalCompilationTime() : 0;
        boolean compiling = timed;
        boolean more = true;
        while (more) {
            call.run();
            long now = System.nanoTime();
            if (timed && now - windowStart >= 1_000_000_000L) {
                long compiled = jit.getTotalCompilationTime();
                compiling = (compiled - compiledAtWindowStart) * 1e6 > JIT_BUSY * (now - windowStart);
                windowStart = now;
                compiledAtWindowStart = compiled;
            }
            double elapsed = (now - start) / 1e9;
            boolean mine = elapsed < seconds || (compiling && elapsed < WARM_UP_CAP * seconds);
            INDArray flag = Nd4j.createFromArray(new float[] {mine ? 1f : 0f});
            more = false;
            for (INDArray f : world.allGather(flag)) {
                more |= f.getFloat(0) == 1f;
                if (f != flag) {
                    f.close();
                }
            }
            flag.close();
        }
    }

    /** One round trip: rank 0 sends {@code a} and receives it back; the other rank returns what it got. */
    private static void pingPong(Transport t, int peer, INDArray a) {
        if (t.rank() == 0) {
            t.send(peer, DATA, a).join();
            t.receive(peer, DATA).join().close();
        } else {
            INDArray back = t.receive(peer, DATA).join();
            t.send(peer, DATA, back).join();
            back.close();
        }
    }

    private static void stream(Transport t, int peer, INDArray a, int messages) {
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int m = 0; m < messages; m++) {
            sent.add(t.send(peer, DATA, a));
        }
        sent.forEach(CompletableFuture::join);
    }

    private static void drain(Transport t, int peer, int messages) {
        List<CompletableFuture<INDArray>> got = new ArrayList<>();
        for (int m = 0; m < messages; m++) {
            got.add(t.receive(peer, DATA));
        }
        got.forEach(f -> f.join().close());
    }

    /** One ring size's arrays, allocated once and reused, as MPI's benchmarks reuse their buffers. */
    private static final class RingArrays implements AutoCloseable {
        final long elements;
        final INDArray block;
        final INDArray whole;
        final INDArray gathered;
        final INDArray reduced;

        RingArrays(Communicator world, long bytes) {
            int p = world.group().size();
            elements = bytes / 4 / p * p;
            block = Nd4j.ones(DataType.FLOAT, elements / p);
            whole = Nd4j.ones(DataType.FLOAT, elements);
            gathered = Nd4j.zeros(DataType.FLOAT, elements);
            reduced = Nd4j.zeros(DataType.FLOAT, elements / p);
        }

        /**
         * One round: an all-gather and a reduce-scatter, each after a barrier and followed by the exchange of the
         * members' times; the slowest member's time of each, microseconds. The warm-up runs exactly these calls, so
         * the first timed size meets no path the JIT has not compiled (the times' exchange, an all-gather of
         * doubles, compiled late made the first size's calls five to seven times slower).
         */
        double[] round(Communicator world) {
            world.barrier();
            long t0 = System.nanoTime();
            world.allGather(block, gathered);
            double g = slowest(world, (System.nanoTime() - t0) / 1e3);
            world.barrier();
            t0 = System.nanoTime();
            world.reduceScatter(whole, reduced);
            double s = slowest(world, (System.nanoTime() - t0) / 1e3);
            return new double[] {g, s};
        }

        @Override
        public void close() {
            block.close();
            whole.close();
            gathered.close();
            reduced.close();
        }
    }

    private static void ring(Communicator world, RingArrays a, int repeats, double warmUpSeconds) {
        int p = world.group().size();
        long elements = a.elements;
        untimed(world, warmUpSeconds, () -> a.round(world));
        double[] gather = new double[repeats];
        double[] scatter = new double[repeats];
        for (int r = -3; r < repeats; r++) {
            double[] t = a.round(world);
            if (r >= 0) {
                gather[r] = t[0];
                scatter[r] = t[1];
            }
        }
        long total = elements * 4;
        double factor = (p - 1) / (double) p;                     // bus bandwidth, as nccl-tests define it
        double g = median(gather);
        double s = median(scatter);
        report(world.transport(), "allgather", p, total, g, total / g / 1e3, total / g / 1e3 * factor, Double.NaN);
        report(world.transport(), "reducescatter", p, total, s, total / s / 1e3, total / s / 1e3 * factor,
                Double.NaN);
    }

    /** The longest time any member took: a collective is as fast as its slowest member. */
    private static double slowest(Communicator world, double us) {
        INDArray all = Nd4j.createFromArray(new double[] {us});
        List<INDArray> times = world.allGather(all);
        double max = 0;
        for (INDArray x : times) {
            max = Math.max(max, x.getDouble(0));
        }
        return max;
    }

    private static void report(Transport t, String kind, int workers, long bytes, double us, double gbps,
                               double bus, double p99Us) {
        if (t.rank() == 0) {
            System.out.printf(Locale.ROOT, "%-14s P=%d %10d bytes %12.1f us %8.3f GB/s%s%s%n", kind, workers, bytes, us,
                    gbps, Double.isNaN(bus) ? "" : String.format(Locale.ROOT, " (bus %.3f GB/s)", bus),
                    Double.isNaN(p99Us) ? "" : String.format(Locale.ROOT, " (p99 %.1f us)", p99Us));
            System.out.printf(Locale.ROOT, "%s%s,%d,%d,%.3f,%.4f,%s,%s%n", RESULT, kind, workers, bytes, us, gbps,
                    Double.isNaN(bus) ? "" : String.format(Locale.ROOT, "%.4f", bus),
                    Double.isNaN(p99Us) ? "" : String.format(Locale.ROOT, "%.3f", p99Us));
        }
    }

    /** The {@code q} quantile of {@code v}, nearest rank. */
    static double percentile(double[] v, double q) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[Math.min(s.length - 1, (int) Math.ceil(q * s.length) - 1)];
    }

    private static double median(double[] v) {
        return GemmRate.median(v);
    }
}
