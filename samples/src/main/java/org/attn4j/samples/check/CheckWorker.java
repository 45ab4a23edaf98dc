package org.attn4j.samples.check;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.samples.io.Npy;
import org.attn4j.samples.metrics.PeakMemory;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * One worker process of a distributed {@code attn4j check}, started by {@link DistributedCheck} through the local
 * launcher (rank, peers and job token come from the environment). It reads the same input files as every other
 * rank, takes its own shard by the algorithm's layout, runs the forward and backward pass over Aeron, and writes
 * its shards ({@code o.npy}, {@code lse.npy}, {@code dq.npy}, {@code dk.npy}, {@code dv.npy}) and
 * {@code rank.json} (times, bytes sent, peak memory) to {@code WORK/rank-R/}.
 */
@Command(name = "check-worker", description = "One rank of a distributed attn4j check (started by attn4j check).")
public final class CheckWorker implements Callable<Integer> {

    @Option(names = "--algo", required = true)
    String algo;

    @Option(names = "--in", required = true)
    Path in;

    @Option(names = "--work", required = true)
    Path work;

    @Option(names = "--causal")
    boolean causal;

    @Option(names = "--window", defaultValue = "0")
    int window;

    @Option(names = "--scale")
    Double scale;

    @Option(names = "--decay", defaultValue = "1")
    double decay;

    @Option(names = "--team", defaultValue = "1")
    int team;

    @Option(names = "--layout")
    SequenceLayout layout;

    /**
     * Entry point.
     *
     * @param args the options above
     */
    public static void main(String[] args) {
        System.exit(new CommandLine(new CheckWorker()).setCaseInsensitiveEnumValuesAllowed(true).execute(args));
    }

    @Override
    public Integer call() throws IOException {
        AttentionMask mask = AttentionMask.builder().causal(causal).window(window).build();
        CheckProblem p = CheckInputs.load(in, mask, scale, decay);
        SequenceAlgorithm a = SequenceAlgorithm.byName(algo);
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            SequenceAlgorithm.Settings s = new SequenceAlgorithm.Settings(t.worldSize(), (int) p.q().size(2),
                    p.q().size(1), p.k().size(1), causal, window, layout, team, decay);
            SequenceLayout l = a.layout(s);
            int r = t.rank();
            int n = t.worldSize();
            INDArray q = l.shard(p.q(), r, n);
            INDArray k = l.shard(p.k(), r, n);
            INDArray v = l.shard(p.v(), r, n);
            INDArray dO = l.shard(p.dO(), r, n);
            SequenceParallelAttention<?> attention = a.create(t, s);
            Communicator world = Communicator.world(t);
            world.barrier();                                  // every connection up before the clocks start
            Path dir = work.resolve("rank-" + r);
            Files.createDirectories(dir);
            ObjectNode stats = run(attention, q, k, v, dO, a.softmax() ? p.scale() : 1.0, t, dir);
            stats.put("rank", r);
            new ObjectMapper().writeValue(dir.resolve("rank.json").toFile(), stats);
            world.barrier();                                  // no rank closes while another still receives
        }
        return 0;
    }

    private static <F extends SequenceParallelAttention.Pass> ObjectNode run(SequenceParallelAttention<F> attention,
            INDArray q, INDArray k, INDArray v, INDArray dO, double scale, AeronTransport t, Path dir)
            throws IOException {
        PeakMemory.collectGarbage();
        PeakMemory memory = PeakMemory.start();
        long b0 = t.traffic().total();
        long t0 = System.nanoTime();
        F f = attention.forward(q, k, v, scale);
        long t1 = System.nanoTime();
        long b1 = t.traffic().total();
        AttentionGradients g = attention.backward(q, k, v, f, dO, scale);
        long t2 = System.nanoTime();
        long b2 = t.traffic().total();
        PeakMemory.Reading peak = memory.stop();
        Npy.write(dir.resolve("o.npy"), f.output());
        if (f.lse() != null) {
            Npy.write(dir.resolve("lse.npy"), f.lse());
        }
        Npy.write(dir.resolve("dq.npy"), g.dq());
        Npy.write(dir.resolve("dk.npy"), g.dk());
        Npy.write(dir.resolve("dv.npy"), g.dv());
        ObjectNode s = new ObjectMapper().createObjectNode();
        s.put("forward_ms", (t1 - t0) / 1e6);
        s.put("backward_ms", (t2 - t1) / 1e6);
        s.put("forward_bytes", b1 - b0);
        s.put("backward_bytes", b2 - b1);
        s.put("peak_bytes", peak.peakBytes());
        return s;
    }
}
