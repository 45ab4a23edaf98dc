package org.attn4j.samples;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.function.Consumer;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.launch.WorkerEnvironment;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code attn4j launch --workers P [--timeout S] -- COMMAND...}: runs a distributed job on this machine with
 * {@link LocalLauncher}. {@code COMMAND} is an attn4j subcommand with its arguments ({@code bench transport}) or
 * the fully qualified name of a class with a {@code main} method and its arguments. Every worker gets its rank,
 * the world size, the peers on loopback and a fresh job token in its environment (docs/distributed.md).
 *
 * <p>Exit code: 0 if every worker exited with 0, else the exit code of the first worker that failed, or
 * {@link LocalLauncher#EXIT_TIMEOUT} when {@code --timeout} struck.
 */
@Command(name = "launch", mixinStandardHelpOptions = true,
        description = {"Start P worker processes on this machine, stream their output with a rank prefix, and stop",
            "them all if one fails. COMMAND is an attn4j subcommand (e.g. bench transport) or a main class.",
            "Exit code: 0, the first failed worker's exit code, or 124 on --timeout."})
public final class LaunchCommand implements Callable<Integer> {

    /** The subcommands that make no sense inside a worker. */
    private static final Set<String> NOT_AS_WORKER = Set.of("launch", "help");

    @Option(names = "--workers", paramLabel = "P", required = true, description = "Number of worker processes.")
    int workers;

    @Option(names = "--timeout", paramLabel = "S", defaultValue = "0",
            description = "Stop every worker after S seconds; 0 for no limit (default: ${DEFAULT-VALUE}).")
    double timeout;

    @Option(names = "--transport-timeout", paramLabel = "S",
            description = "How long a worker's transport call may wait, in seconds (sets ATTN4J_TIMEOUT_MS; "
                    + "default: the transport's, 60).")
    Double transportTimeout;

    @Option(names = "--grace", paramLabel = "S", defaultValue = "10",
            description = "After the first failure, seconds the other workers get to exit by themselves "
                    + "(default: ${DEFAULT-VALUE}).")
    double grace;

    @Option(names = "--heap", paramLabel = "SIZE", defaultValue = "2g",
            description = "Java heap per worker, as -Xmx takes it (default: ${DEFAULT-VALUE}).")
    String heap;

    @Parameters(arity = "1..*", paramLabel = "COMMAND",
            description = "An attn4j subcommand and its arguments, or a main class and its arguments.")
    List<String> command;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws IOException, InterruptedException {
        if (workers < 1 || workers > 256) {
            throw new UserInputException("--workers must be in [1, 256], got " + workers);
        }
        if (!(timeout >= 0) || !(grace >= 0) || (transportTimeout != null && !(transportTimeout > 0))) {
            throw new UserInputException("--timeout and --grace must be >= 0 and --transport-timeout > 0, got "
                    + timeout + ", " + grace + ", " + transportTimeout);
        }
        String first = command.get(0);
        String mainClass;
        List<String> args;
        Set<String> subcommands = spec.root().subcommands().keySet();
        if (subcommands.contains(first) && !NOT_AS_WORKER.contains(first)) {
            mainClass = Attn4jCli.class.getName();
            args = command;
        } else if (NOT_AS_WORKER.contains(first)) {
            throw new UserInputException("'" + first + "' cannot run as a worker");
        } else {
            checkMainClass(first, subcommands);
            mainClass = first;
            args = command.subList(1, command.size());
        }
        LocalLauncher.Builder b;
        try {
            b = LocalLauncher.builder(workers, mainClass).args(args).heap(heap)
                    .stopGrace(Duration.ofMillis(Math.round(grace * 1000)))
                    .output(printer(spec.commandLine().getOut()), printer(spec.commandLine().getErr()));
        } catch (IllegalArgumentException e) {
            throw new UserInputException(e.getMessage(), e);
        }
        if (timeout > 0) {
            b.timeout(Duration.ofMillis(Math.round(timeout * 1000)));
        }
        if (transportTimeout != null) {
            b.env(WorkerEnvironment.TIMEOUT_MS, Long.toString(Math.round(transportTimeout * 1000)));
        }
        LaunchResult result = b.build().run();
        if (!result.succeeded()) {
            PrintWriter err = spec.commandLine().getErr();
            err.println("launch: " + result);
            err.flush();
        }
        return result.exitCode();
    }

    /** Refuses a name that is neither a subcommand nor a loadable class with {@code public static void main}. */
    private static void checkMainClass(String name, Set<String> subcommands) {
        String hint = "'" + name + "' is neither an attn4j subcommand (" + String.join(", ", subcommands.stream()
                .filter(s -> !NOT_AS_WORKER.contains(s)).sorted().toList()) + ") nor a main class on the class path";
        try {
            Method main = Class.forName(name, false, LaunchCommand.class.getClassLoader())
                    .getMethod("main", String[].class);
            if (!Modifier.isStatic(main.getModifiers())) {
                throw new UserInputException(hint + " (its main method is not static)");
            }
        } catch (ClassNotFoundException | NoSuchMethodException | LinkageError e) {
            throw new UserInputException(hint);
        }
    }

    /** A thread-safe line sink onto a picocli writer (worker lines arrive from several threads). */
    private static Consumer<String> printer(PrintWriter w) {
        return line -> {
            synchronized (w) {
                w.println(line);
                w.flush();
            }
        };
    }
}
