package org.attn4j.samples.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One worker of {@code attn4j bench distributed}, started by {@link DistributedBenchCommand} through the local
 * launcher. Arguments: {@code ALGOS LENGTHS B H HKV D REPEATS WARM_UP_SECONDS} (comma-separated lists for the first
 * two). For
 * every algorithm that accepts the configuration and every N, each rank builds the same seeded float32 inputs,
 * takes its shard, runs two untimed forward+backward passes and then {@code REPEATS} timed ones (a barrier
 * before each; every worker first runs the local flash op for {@code WARM_UP_SECONDS} so the JIT has compiled it),
 * and prints {@code RESULT algo,workers,n,rank,config,forward_ms,backward_ms,forward_bytes,backward_bytes} with
 * its median times and the bytes it sent in one pass.
 */
public final class DistributedBenchWorker {

    /** The prefix of result lines. */
    static final String RESULT = "RESULT ";

    /** Untimed passes per configuration before the timed ones. */
    private static final int UNTIMED = 2;
    /** How long each worker runs the local flash op before any measurement by default (JIT compilation). */
    static final double WARM_UP_SECONDS = 2;

    private DistributedBenchWorker() {
    }

    /** Runs the local flash forward and backward for {@code seconds}, so the JIT has compiled them. */
    private static void warmUp(int h, int hkv, int d, double seconds) {
        Nd4j.getRandom().setSeed(1);
        INDArray q = Nd4j.randn(DataType.FLOAT, 1, h, 512, d);
        INDArray k = Nd4j.randn(DataType.FLOAT, 1, hkv, 512, d);
        FlashAttention flash = FlashAttention.defaults();
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            org.attn4j.ops.flash.AttentionOutput o = flash.forward(q, k, k, AttentionMask.causal(), 0.125);
            flash.backward(q, k, k, o.output(), o.lse(), q, AttentionMask.causal(), 0.125);
        }
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        List<String> algos = List.of(args[0].split(","));
        int[] lengths = Arrays.stream(args[1].split(",")).mapToInt(Integer::parseInt).toArray();
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            for (DistributedBenchCommand.RankRow row : run(t, algos, lengths, Integer.parseInt(args[2]),
                    Integer.parseInt(args[3]), Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                    Integer.parseInt(args[6]), Double.parseDouble(args[7]))) {
                System.out.println(RESULT + row.csv());
            }
        }
        System.out.flush();
    }

    /**
     * Measures every algorithm of {@code algos} that accepts the configuration at every N on this rank, with the
     * other ranks of {@code t}; every rank returns its own rows.
     */
    static List<DistributedBenchCommand.RankRow> run(AeronTransport t, List<String> algos, int[] lengths, int b,
                                                     int h, int hkv, int d, int repeats, double warmUpSeconds) {
        List<DistributedBenchCommand.RankRow> rows = new ArrayList<>();
        Communicator world = Communicator.world(t);
        warmUp(h, hkv, d, warmUpSeconds);
        world.barrier();
        for (String name : algos) {
            SequenceAlgorithm a = SequenceAlgorithm.byName(name);
            for (int n : lengths) {
                SequenceAlgorithm.Settings s = settings(a, t.worldSize(), n, h, hkv);
                try {
                    a.validate(s);
                } catch (IllegalArgumentException e) {
                    continue;                        // every rank skips the same configurations
                }
                rows.add(measure(t, world, a, s, b, d, repeats));
            }
        }
        world.barrier();
        return rows;
    }

    /** Causal attention, every option at its default (WallFacer: the largest team C whose square divides P). */
    static SequenceAlgorithm.Settings settings(SequenceAlgorithm a, int p, int n, int h, int hkv) {
        return SequenceAlgorithm.Settings.of(p, n, true).withHeads(h, hkv);
    }

    private static DistributedBenchCommand.RankRow measure(Transport t, Communicator world, SequenceAlgorithm a, SequenceAlgorithm.Settings s,
                                int b, int d, int repeats) {
        SequenceLayout layout = a.layout(s);
        int p = t.worldSize();
        Nd4j.getRandom().setSeed(s.length());
        INDArray q = layout.shard(Nd4j.randn(DataType.FLOAT, b, s.heads(), s.length(), d), t.rank(), p);
        INDArray k = layout.shard(Nd4j.randn(DataType.FLOAT, b, s.kvHeads(), s.length(), d), t.rank(), p);
        INDArray v = layout.shard(Nd4j.randn(DataType.FLOAT, b, s.kvHeads(), s.length(), d), t.rank(), p);
        INDArray dO = layout.shard(Nd4j.randn(DataType.FLOAT, b, s.heads(), s.length(), d), t.rank(), p);
        SequenceParallelAttention<?> attention = a.create(t, s);
        double scale = a.softmax() ? FlashAttention.defaultScale(d) : 1.0;
        double[] fwd = new double[repeats];
        double[] bwd = new double[repeats];
        long[] bytes = new long[2];
        for (int r = -UNTIMED; r < repeats; r++) {
            world.barrier();
            double[] one = pass(attention, q, k, v, dO, scale, t, bytes);
            if (r >= 0) {
                fwd[r] = one[0];
                bwd[r] = one[1];
            }
        }
        return new DistributedBenchCommand.RankRow(a.name(), p, s.length(), t.rank(), a.configuration(s), median(fwd),
                median(bwd), bytes[0], bytes[1]);
    }

    private static <F extends SequenceParallelAttention.Pass> double[] pass(SequenceParallelAttention<F> a,
            INDArray q, INDArray k, INDArray v, INDArray dO, double scale, Transport t, long[] bytes) {
        long b0 = t.traffic().total();
        long t0 = System.nanoTime();
        F f = a.forward(q, k, v, scale);
        long t1 = System.nanoTime();
        long b1 = t.traffic().total();
        a.backward(q, k, v, f, dO, scale);
        long t2 = System.nanoTime();
        bytes[0] = b1 - b0;
        bytes[1] = t.traffic().total() - b1;
        return new double[] {(t1 - t0) / 1e6, (t2 - t1) / 1e6};
    }

    private static double median(double[] x) {
        double[] s = x.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
