package org.attn4j.samples.check;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.sequence.DocumentAgreement;
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
 * One worker process of a distributed {@code attn4j check} on this machine, started by {@link DistributedCheck}
 * through the local launcher (rank, peers and job token come from the environment). It reads the same input files as every other
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

    /** The algorithm's own options, {@code --option team=2}. */
    @Option(names = "--option")
    Map<String, Double> options = new LinkedHashMap<>();

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
            Shards shards = run(t, p, a, layout, options);
            Path dir = work.resolve("rank-" + t.rank());
            Files.createDirectories(dir);
            Npy.write(dir.resolve("o.npy"), shards.output());
            if (shards.lse() != null) {
                Npy.write(dir.resolve("lse.npy"), shards.lse());
            }
            Npy.write(dir.resolve("dq.npy"), shards.gradients().dq());
            Npy.write(dir.resolve("dk.npy"), shards.gradients().dk());
            Npy.write(dir.resolve("dv.npy"), shards.gradients().dv());
            ObjectNode stats = new ObjectMapper().createObjectNode();
            stats.put("rank", t.rank());
            stats.put("forward_ms", shards.forwardMs());
            stats.put("backward_ms", shards.backwardMs());
            stats.put("forward_bytes", shards.forwardBytes());
            stats.put("backward_bytes", shards.backwardBytes());
            stats.put("peak_bytes", shards.peakBytes());
            new ObjectMapper().writeValue(dir.resolve("rank.json").toFile(), stats);
            Communicator.world(t).barrier();                 // no rank closes while another still receives
        }
        return 0;
    }

    /**
     * One rank's results: its shards of the outputs and gradients, in the layout's order, and its measurements.
     *
     * @param output        this rank's rows of O
     * @param lse           this rank's rows of the log-sum-exp, or null for linear attention
     * @param gradients     this rank's rows of dQ, dK, dV
     * @param forwardMs     the forward pass, after every rank's transport was connected
     * @param backwardMs    the backward pass
     * @param forwardBytes  bytes this rank sent in the forward pass
     * @param backwardBytes bytes this rank sent in the backward pass
     * @param peakBytes     this process's peak memory over both passes
     */
    record Shards(INDArray output, INDArray lse, AttentionGradients gradients, double forwardMs, double backwardMs,
                  long forwardBytes, long backwardBytes, long peakBytes) {
    }

    /** Takes this rank's shard of the problem and runs the forward and backward pass with the other ranks. */
    static Shards run(AeronTransport t, CheckProblem p, SequenceAlgorithm a, SequenceLayout layout,
                      Map<String, Double> options) {
        SequenceAlgorithm.Settings s = new SequenceAlgorithm.Settings(t.worldSize(), (int) p.q().size(2),
                p.q().size(1), p.k().size(1), p.mask().isCausal(), (int) p.mask().window(), layout, options);
        SequenceLayout l = a.layout(s);
        int r = t.rank();
        int n = t.worldSize();
        SequenceParallelAttention<?> attention = a.create(t, s).withDocuments(p.mask().documents());
        DocumentAgreement.require(Communicator.world(t), p.mask().documents());   // also connects every rank
        return run(attention, l.shard(p.q(), r, n), l.shard(p.k(), r, n), l.shard(p.v(), r, n),
                l.shard(p.dO(), r, n), a.softmax() ? p.scale() : 1.0, t);
    }

    private static <F extends SequenceParallelAttention.Pass> Shards run(SequenceParallelAttention<F> attention,
            INDArray q, INDArray k, INDArray v, INDArray dO, double scale, AeronTransport t) {
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
        return new Shards(f.output(), f.lse(), g, (t1 - t0) / 1e6, (t2 - t1) / 1e6, b1 - b0, b2 - b1,
                peak.peakBytes());
    }
}
