package org.attn4j.samples.check;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.io.Npy;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * A sequence-parallel algorithm run by {@code attn4j check --algo NAME --workers P}: P worker processes on this
 * machine ({@link CheckWorker} through {@link LocalLauncher}, talking over Aeron) each read the inputs, run their
 * shard, and write their results; this class gathers the shards back into full arrays in the layout's order.
 * Under a scheduler (torchrun, Slurm, MPI, Kubernetes variables) this process is one of the P ranks instead, and
 * the shards travel to every rank over the transport; only rank 0 writes them. The
 * forward call runs the whole job (a process cannot be paused between passes); the backward call returns the
 * gradients it produced.
 *
 * <p>Times are each worker's own (from after the transport is connected to the end of each pass), so process
 * start-up does not count; the slowest rank's are reported as the pass times.
 */
final class DistributedCheck implements CheckableAlgorithm {

    /** The per-rank measurements a worker wrote. */
    record RankReport(int rank, double forwardMs, double backwardMs, long forwardBytes, long backwardBytes,
                      long peakBytes) {
    }

    private final SequenceAlgorithm algorithm;
    private final Path in;
    private final int workers;
    private final Map<String, Double> options;
    private final SequenceLayout layout;
    private final String heap;
    private final Duration timeout;
    private final Consumer<String> out;
    private final Consumer<String> err;
    private final boolean asRank;
    private final List<RankReport> reports = new ArrayList<>();
    private boolean leader = true;
    private AttentionGradients gradients;

    /**
     * A check of {@code workers} ranks: local worker processes, or with {@code asRank} this process as one rank of
     * a job a scheduler started (its transport from the environment, the other ranks on other hosts).
     */
    DistributedCheck(SequenceAlgorithm algorithm, Path in, int workers, Map<String, Double> options,
                     SequenceLayout layout, String heap, Duration timeout, Consumer<String> out, Consumer<String> err,
                     boolean asRank) {
        this.algorithm = algorithm;
        this.in = in;
        this.workers = workers;
        this.options = Map.copyOf(options);
        this.layout = layout;
        this.heap = heap;
        this.timeout = timeout;
        this.out = out;
        this.err = err;
        this.asRank = asRank;
    }

    /** Whether this process writes the results: always for local workers, rank 0 only as a rank of a job. */
    boolean leader() {
        return leader;
    }

    @Override
    public int workers() {
        return workers;
    }

    /** The sequence-parallel algorithm the workers ran. */
    SequenceAlgorithm algorithm() {
        return algorithm;
    }

    /** The layout the workers used. */
    SequenceLayout layout(CheckProblem p) {
        return algorithm.layout(settings(p));
    }

    /** The settings of this check; validating them is the first thing {@link #forward} does. */
    SequenceAlgorithm.Settings settings(CheckProblem p) {
        return new SequenceAlgorithm.Settings(workers, (int) p.q().size(2), p.q().size(1), p.k().size(1),
                p.mask().isCausal(), (int) p.mask().window(), layout, options);
    }

    @Override
    public AttentionOutput forward(CheckProblem p) {
        SequenceAlgorithm.Settings s = settings(p);
        algorithm.validate(s);                                   // bad input stops here, before any process starts
        if (asRank) {
            return runAsRank(p);
        }
        Path work;
        try {
            work = Files.createTempDirectory("attn4j-check-");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        try {
            launch(p, s, work);
            SequenceLayout l = algorithm.layout(s);
            INDArray o = gather(work, "o.npy", l);
            INDArray lse = algorithm.softmax() ? gather(work, "lse.npy", l) : null;
            gradients = new AttentionGradients(gather(work, "dq.npy", l), gather(work, "dk.npy", l),
                    gather(work, "dv.npy", l));
            ObjectMapper json = new ObjectMapper();
            for (int r = 0; r < workers; r++) {
                JsonNode j = json.readTree(work.resolve("rank-" + r).resolve("rank.json").toFile());
                reports.add(new RankReport(r, j.get("forward_ms").asDouble(), j.get("backward_ms").asDouble(),
                        j.get("forward_bytes").asLong(), j.get("backward_bytes").asLong(),
                        j.get("peak_bytes").asLong()));
            }
            return new AttentionOutput(o, lse);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } finally {
            deleteTree(work);
        }
    }

    /**
     * This process is one rank: it runs its shard with the others, then every rank gathers every shard and every
     * rank's measurements (after the timed passes), so rank 0 can write the whole result.
     */
    private AttentionOutput runAsRank(CheckProblem p) {
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            CheckWorker.Shards mine = CheckWorker.run(t, p, algorithm, layout, options);
            Communicator world = Communicator.world(t);
            SequenceLayout l = layout(p);
            INDArray o = l.unshard(world.allGather(mine.output()).toArray(INDArray[]::new));
            INDArray lse = mine.lse() == null ? null : l.unshard(world.allGather(mine.lse()).toArray(INDArray[]::new));
            AttentionGradients g = mine.gradients();
            gradients = new AttentionGradients(l.unshard(world.allGather(g.dq()).toArray(INDArray[]::new)),
                    l.unshard(world.allGather(g.dk()).toArray(INDArray[]::new)),
                    l.unshard(world.allGather(g.dv()).toArray(INDArray[]::new)));
            INDArray stats = Nd4j.createFromArray(mine.forwardMs(), mine.backwardMs(), mine.forwardBytes(),
                    mine.backwardBytes(), mine.peakBytes());
            List<INDArray> all = world.allGather(stats);
            for (int r = 0; r < all.size(); r++) {
                double[] x = all.get(r).toDoubleVector();
                reports.add(new RankReport(r, x[0], x[1], (long) x[2], (long) x[3], (long) x[4]));
            }
            leader = t.rank() == 0;
            world.barrier();                                  // no rank closes while another still receives
            return new AttentionOutput(o, lse);
        }
    }

    @Override
    public AttentionGradients backward(CheckProblem p, AttentionOutput forward) {
        if (gradients == null) {
            throw new IllegalStateException("backward before forward");
        }
        return gradients;
    }

    @Override
    public List<RankTraffic> bytesSent() {
        return reports.stream().map(r -> new RankTraffic(r.rank(), r.forwardBytes(), r.backwardBytes())).toList();
    }

    /** What each worker measured, in rank order (empty before {@link #forward}). */
    List<RankReport> reports() {
        return List.copyOf(reports);
    }

    private void launch(CheckProblem p, SequenceAlgorithm.Settings s, Path work) throws IOException {
        List<String> args = new ArrayList<>(List.of("--algo", algorithm.name(), "--in", in.toString(), "--work",
                work.toString(), "--window", Integer.toString(s.window()), "--layout", algorithm.layout(s).name(),
                "--decay", Double.toString(p.decay())));
        options.forEach((name, value) -> args.addAll(List.of("--option", name + "=" + value)));
        if (s.causal()) {
            args.add("--causal");
        }
        if (algorithm.softmax()) {
            args.addAll(List.of("--scale", Double.toString(p.scale())));
        }
        LocalLauncher.Builder b = LocalLauncher.builder(workers, CheckWorker.class.getName()).args(args).heap(heap)
                .output(out, err);
        if (timeout != null) {
            b.timeout(timeout);
        }
        LaunchResult result;
        try {
            result = b.build().run();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the check workers ran", e);
        }
        if (!result.succeeded()) {
            throw new UserInputException(algorithm.name() + " on " + workers + " workers failed: " + result);
        }
    }

    private INDArray gather(Path work, String name, SequenceLayout l) throws IOException {
        INDArray[] shards = new INDArray[workers];
        for (int r = 0; r < workers; r++) {
            shards[r] = Npy.read(work.resolve("rank-" + r).resolve(name));
        }
        return l.unshard(shards);
    }

    private static void deleteTree(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
        } catch (IOException e) {
            // a temporary directory left behind is harmless; the results are already read
        }
    }
}
