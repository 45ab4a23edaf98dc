package org.attn4j.samples.checkpoint;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import org.attn4j.distributed.training.CheckpointExport;
import org.attn4j.samples.UserInputException;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code attn4j checkpoint}: tools for the sharded checkpoints distributed training writes. */
@Command(name = "checkpoint", mixinStandardHelpOptions = true,
        description = "Tools for sharded checkpoints (train --checkpoint-dir).",
        subcommands = CheckpointCommand.Export.class)
public final class CheckpointCommand implements Runnable {

    @Spec
    CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing subcommand; one of "
                + String.join(", ", spec.subcommands().keySet()));
    }

    /**
     * {@code attn4j checkpoint export}: the newest complete checkpoint of a directory, consolidated from its shards
     * (any world size, any ZeRO stage) into one DL4J model zip.
     */
    @Command(name = "export", mixinStandardHelpOptions = true,
            description = {"Consolidates the newest complete sharded checkpoint in DIR into one DL4J model zip",
                "(ModelSerializer format: MultiLayerNetwork.load or ModelSerializer.restoreComputationGraph",
                "reads it). Weights only: the optimizer state stays in the shards (resume with train --resume)."})
    public static final class Export implements Callable<Integer> {

        @Option(names = "--dir", paramLabel = "DIR", required = true, description = "The checkpoint directory.")
        Path dir;

        @Option(names = "--out", paramLabel = "FILE", required = true, description = "The model zip to write.")
        Path out;

        @Spec
        CommandSpec spec;

        @Override
        public Integer call() {
            if (!Files.isDirectory(dir)) {
                throw new UserInputException("--dir " + dir + " is not a directory");
            }
            try {
                int step = CheckpointExport.export(dir, out);
                spec.commandLine().getOut().printf("wrote %s (step %d of %s)%n", out, step, dir);
                spec.commandLine().getOut().flush();
                return 0;
            } catch (IllegalArgumentException e) {
                throw new UserInputException(e.getMessage(), e);
            } catch (IOException e) {
                throw new UserInputException("checkpoint export: " + e.getMessage(), e);
            }
        }
    }
}
