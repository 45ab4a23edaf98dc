package org.attn4j.samples.bench;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench}: the benchmarks, one subcommand each. Numbers go to files (and stdout); nothing
 * here asserts a time.
 */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = "Run a benchmark and write its CSV, chart and markdown table.",
        subcommands = {AttentionBenchCommand.class, LinearBenchCommand.class, ThreadingBenchCommand.class,
            DistributedBenchCommand.class, ClusterBenchCommand.class, ZeroBenchCommand.class, TrainingBenchCommand.class,
            SameDiffBenchCommand.class, AllBenchCommand.class, TransportBenchCommand.class, PackedBenchCommand.class,
            GenerateBenchCommand.class, PrefillBenchCommand.class, LlamaBenchCommand.class})
public final class BenchCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing benchmark; one of "
                + String.join(", ", spec.subcommands().keySet()));
    }
}
