package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.train.GptModel;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench zero}: what ZeRO saves per worker. For W in-JVM workers (sequence-parallel ring attention)
 * and each ZeRO stage, trains a GPT-like model two steps and reads, on every worker, the bytes of the optimizer
 * state it holds, of the summed gradient it receives per step and of the parameters it keeps current between
 * steps. Writes {@code bench-zero.csv} and the {@code zero} section of {@code benchmarks.md}.
 */
@Command(name = "zero", mixinStandardHelpOptions = true,
        description = {"Optimizer-state, gradient and parameter bytes per worker under ZeRO stages 0-3.",
            "Writes OUT/bench-zero.csv and a section of OUT/benchmarks.md."})
public final class ZeroBenchCommand implements Callable<Integer> {

    static final String CSV = "bench-zero.csv";
    static final String SECTION = "zero";

    @Option(names = "--workers", paramLabel = "W", split = ",", defaultValue = "1,2,4",
            description = "Worker counts (default: ${DEFAULT-VALUE}).")
    List<Integer> workers;

    @Option(names = "--width", defaultValue = "128", description = "Model width (default: ${DEFAULT-VALUE}).")
    int width;

    @Option(names = "--blocks", defaultValue = "4", description = "Blocks (default: ${DEFAULT-VALUE}).")
    int blocks;

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "docs",
            description = "Directory for the CSV and benchmarks.md (default: ${DEFAULT-VALUE}).")
    Path out;

    @Spec
    CommandSpec spec;

    record Row(int workers, int stage, long params, long stateBytes, long gradientBytes, long paramBytes) {
    }

    @Override
    public Integer call() throws Exception {
        for (int w : workers) {
            if (w < 1 || w > 8) {
                throw new UserInputException("--workers must be in [1, 8], got " + w);
            }
        }
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        GptModel model = new GptModel(64, width, 4, 2, blocks, false, DataType.FLOAT, 1e-3, 1);
        List<Row> rows = new ArrayList<>();
        for (ZeroStage z : ZeroStage.values()) {
            for (int w : workers) {
                rows.add(measure(model, w, z));
            }
        }
        Files.createDirectories(out);
        StringBuilder csv = new StringBuilder("workers,zero_stage,params,optimizer_state_bytes,gradient_bytes,"
                + "current_parameter_bytes\n");
        for (Row r : rows) {
            csv.append(String.format(Locale.ROOT, "%d,%d,%d,%d,%d,%d%n", r.workers(), r.stage(), r.params(),
                    r.stateBytes(), r.gradientBytes(), r.paramBytes()));
        }
        Files.writeString(out.resolve(CSV), csv, StandardCharsets.UTF_8);
        String command = "./attn4j " + String.join(" ", spec.commandLine().getParseResult().originalArgs());
        MarkdownSection.replace(out.resolve(AttentionBenchReport.MARKDOWN), SECTION, markdown(rows, model,
                command.strip()));
        PrintWriter log = spec.commandLine().getOut();
        log.printf("wrote %s and the '%s' section of %s%n", out.resolve(CSV), SECTION,
                out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }

    /** Two steps on W in-JVM workers; the largest worker's figures (they differ by at most one element). */
    private static Row measure(GptModel model, int w, ZeroStage z) throws Exception {
        List<InJvmTransport> transports = InJvmTransport.group(w, Duration.ofSeconds(60));
        ExecutorService pool = Executors.newFixedThreadPool(w);
        try {
            DataSet batch = batch(model, 2, 32);
            List<Future<long[]>> futures = new ArrayList<>();
            for (Transport t : transports) {
                futures.add(pool.submit(() -> {
                    DistributedTrainer trainer = DistributedTrainer.builder(model.build(), t)
                            .strategy(ParallelStrategy.sequence(SequenceAlgorithm.RING, w).withZero(z)).build();
                    trainer.fit(batch);
                    trainer.fit(batch);
                    return new long[] {trainer.optimizerStateBytes(), trainer.gradientBytes(),
                            trainer.currentParameterBytes()};
                }));
            }
            long[] max = new long[3];
            for (Future<long[]> f : futures) {
                long[] b = f.get(600, TimeUnit.SECONDS);
                for (int i = 0; i < 3; i++) {
                    max[i] = Math.max(max[i], b[i]);
                }
            }
            return new Row(w, z.stage(), model.build().numParams(), max[0], max[1], max[2]);
        } finally {
            pool.shutdownNow();
            transports.forEach(Transport::close);
        }
    }

    private static DataSet batch(GptModel model, int b, int n) {
        Nd4j.getRandom().setSeed(3);
        org.nd4j.linalg.api.ndarray.INDArray tokens = Nd4j.zeros(model.type(), b, 1, n);
        org.nd4j.linalg.api.ndarray.INDArray labels = Nd4j.zeros(model.type(), b, model.vocab(), n);
        for (int i = 0; i < b; i++) {
            for (int t = 0; t < n; t++) {
                tokens.putScalar(new int[] {i, 0, t}, (i + t) % model.vocab());
                labels.putScalar(new int[] {i, (i + t + 1) % model.vocab(), t}, 1.0);
            }
        }
        return new DataSet(tokens, labels);
    }

    private static String markdown(List<Row> rows, GptModel m, String command) {
        StringBuilder b = new StringBuilder("## ZeRO: optimizer state, gradients and parameters per worker\n\n");
        b.append("`").append(command).append("`; GPT-like model: width ").append(m.width()).append(", ")
                .append(m.blocks()).append(" blocks, vocabulary ").append(m.vocab()).append(", float32, Adam (two "
                + "state values per parameter), ").append(rows.get(0).params()).append(" parameters; W in-JVM "
                + "workers, sequence-parallel ring attention, two training steps.\n\n");
        b.append("- Measured on every worker after two steps, the largest worker's: optimizer state = the bytes of "
                + "the Adam state arrays the worker allocated; gradient = the bytes of the summed gradient it "
                + "receives per step (the whole vector after an all-reduce; its slice after a reduce-scatter); "
                + "current parameters = the parameter bytes it keeps up to date between steps.\n");
        b.append("- DL4J keeps one flat parameter vector and one flat gradient vector per network, so every "
                + "worker still allocates both in full: the local backward pass writes the whole gradient vector, "
                + "and the layers read the whole parameter vector. ZeRO stage 3 therefore shards parameters at "
                + "rest (only the worker's slice is current between steps; the vector is gathered just before the "
                + "forward pass) but does not shrink that buffer.\n\n");
        b.append("| W | ZeRO stage | optimizer state / worker | gradient received / worker | current parameters "
                + "/ worker |\n|---:|---:|---:|---:|---:|\n");
        for (Row r : rows) {
            b.append(String.format(Locale.ROOT, "| %d | %d | %.3f MB | %.3f MB | %.3f MB |%n", r.workers(),
                    r.stage(), r.stateBytes() / 1e6, r.gradientBytes() / 1e6, r.paramBytes() / 1e6));
        }
        return b.toString();
    }
}
