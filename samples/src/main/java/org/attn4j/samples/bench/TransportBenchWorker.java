package org.attn4j.samples.bench;

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
 * each size in bytes; {@code ring SIZES REPEATS} (P workers): ring all-gather and reduce-scatter of arrays of each
 * total size. Rank 0 prints one {@code RESULT kind,workers,bytes,median_us,gb_per_s,bus_gb_per_s} line per
 * measurement (GB = 10^9 bytes).
 */
public final class TransportBenchWorker {

    /** The prefix of result lines. */
    static final String RESULT = "RESULT ";

    private static final int DATA = 1;
    private static final int ACK = 2;
    /** Bytes streamed per bandwidth measurement, at least 4 messages. */
    private static final long STREAM_BYTES = 64L << 20;

    private TransportBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        long[] sizes = Arrays.stream(args[1].split(",")).mapToLong(Long::parseLong).toArray();
        int repeats = Integer.parseInt(args[2]);
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            Communicator world = Communicator.world(t);
            world.barrier();                                      // every connection up before the first clock
            for (long size : sizes) {
                if (args[0].equals("p2p")) {
                    pointToPoint(t, size, repeats);
                } else {
                    ring(world, size, repeats);
                }
            }
            world.barrier();
        }
        System.out.flush();
    }

    private static void pointToPoint(Transport t, long bytes, int repeats) {
        INDArray a = Nd4j.ones(DataType.FLOAT, bytes / 4);
        int peer = 1 - t.rank();
        double[] rtt = new double[repeats];
        for (int r = -2; r < repeats; r++) {                      // two untimed rounds
            long t0 = System.nanoTime();
            if (t.rank() == 0) {
                t.send(peer, DATA, a).join();
                t.receive(peer, DATA).join().close();
            } else {
                INDArray back = t.receive(peer, DATA).join();
                t.send(peer, DATA, back).join();
                back.close();
            }
            if (r >= 0) {
                rtt[r] = (System.nanoTime() - t0) / 1e3;
            }
        }
        double halfRtt = median(rtt) / 2;
        report(t, "p2p-latency", 2, bytes, halfRtt, bytes / halfRtt / 1e3, Double.NaN);

        int messages = (int) Math.max(4, Math.min(2048, STREAM_BYTES / bytes));
        double[] us = new double[repeats];
        for (int r = -1; r < repeats; r++) {
            long t0 = System.nanoTime();
            if (t.rank() == 0) {
                List<CompletableFuture<Void>> sent = new ArrayList<>();
                for (int m = 0; m < messages; m++) {
                    sent.add(t.send(peer, DATA, a));
                }
                sent.forEach(CompletableFuture::join);
                t.receive(peer, ACK).join().close();
            } else {
                List<CompletableFuture<INDArray>> got = new ArrayList<>();
                for (int m = 0; m < messages; m++) {
                    got.add(t.receive(peer, DATA));
                }
                got.forEach(f -> f.join().close());
                t.send(peer, ACK, Nd4j.zeros(DataType.FLOAT, 1)).join();
            }
            if (r >= 0) {
                us[r] = (System.nanoTime() - t0) / 1e3;
            }
        }
        double perMessage = median(us) / messages;
        report(t, "p2p-bandwidth", 2, bytes, perMessage, bytes / perMessage / 1e3, Double.NaN);
        a.close();
    }

    private static void ring(Communicator world, long bytes, int repeats) {
        int p = world.group().size();
        long elements = bytes / 4 / p * p;
        INDArray block = Nd4j.ones(DataType.FLOAT, elements / p);
        INDArray whole = Nd4j.ones(DataType.FLOAT, elements);
        double[] gather = new double[repeats];
        double[] scatter = new double[repeats];
        for (int r = -1; r < repeats; r++) {
            world.barrier();
            long t0 = System.nanoTime();
            List<INDArray> all = world.allGather(block);
            double g = slowest(world, (System.nanoTime() - t0) / 1e3);
            for (INDArray x : all) {
                if (x != block) {
                    x.close();
                }
            }
            world.barrier();
            t0 = System.nanoTime();
            world.reduceScatter(whole).close();
            double s = slowest(world, (System.nanoTime() - t0) / 1e3);
            if (r >= 0) {
                gather[r] = g;
                scatter[r] = s;
            }
        }
        long total = elements * 4;
        double factor = (p - 1) / (double) p;                     // bus bandwidth, as nccl-tests define it
        double g = median(gather);
        double s = median(scatter);
        report(world.transport(), "allgather", p, total, g, total / g / 1e3, total / g / 1e3 * factor);
        report(world.transport(), "reducescatter", p, total, s, total / s / 1e3, total / s / 1e3 * factor);
        block.close();
        whole.close();
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
                               double bus) {
        if (t.rank() == 0) {
            System.out.printf(Locale.ROOT, "%-14s P=%d %10d bytes %12.1f us %8.3f GB/s%s%n", kind, workers, bytes, us,
                    gbps, Double.isNaN(bus) ? "" : String.format(Locale.ROOT, " (bus %.3f GB/s)", bus));
            System.out.printf(Locale.ROOT, "%s%s,%d,%d,%.3f,%.4f,%s%n", RESULT, kind, workers, bytes, us, gbps,
                    Double.isNaN(bus) ? "" : String.format(Locale.ROOT, "%.4f", bus));
        }
    }

    private static double median(double[] v) {
        return GemmRate.median(v);
    }
}
