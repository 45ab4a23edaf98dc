package org.attn4j.samples.bench;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.Options;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j bench all}: regenerates every section of {@code benchmarks.md} and its charts, one benchmark after
 * the other with their default settings (each its own subcommand: attention, linear, transport, distributed, zero,
 * training, samediff, packed, generate, prefill). Stops at the first that fails and returns its exit code. Takes a while: run it on a quiet
 * machine.
 */
@Command(name = "all", mixinStandardHelpOptions = true,
        description = {"Run every benchmark of benchmarks.md with its defaults: attention, linear, transport,",
            "distributed, zero, training, samediff, packed, generate, prefill (stops at the first failure)."})
public final class AllBenchCommand implements Callable<Integer> {

    /** The benchmarks, in the order they run. */
    static final List<String> BENCHMARKS = List.of("attention", "linear", "transport", "distributed", "zero",
            "training", "samediff", "packed", "generate", "prefill");

    @Option(names = "--out", paramLabel = "DIR", defaultValue = "runs/bench",
            description = "Directory for the CSVs, charts and benchmarks.md (default: ${DEFAULT-VALUE}; --out docs "
                    + "regenerates the repository's pages).")
    Path out;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() {
        Options.outputDirectory("--out", out);
        PrintWriter log = spec.commandLine().getOut();
        for (String name : BENCHMARKS) {
            log.println("== bench " + name);
            log.flush();
            CommandLine cl = Attn4jCli.commandLine();
            cl.setOut(spec.commandLine().getOut());
            cl.setErr(spec.commandLine().getErr());
            int code = cl.execute("bench", name, "--out", out.toString());
            if (code != 0) {
                spec.commandLine().getErr().println("bench all: bench " + name + " failed with exit code " + code);
                spec.commandLine().getErr().flush();
                return code;
            }
        }
        log.println("bench all: regenerated every section of " + out.resolve(AttentionBenchReport.MARKDOWN));
        log.flush();
        return 0;
    }
}
