package org.attn4j.samples;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.util.Properties;

import org.attn4j.distributed.launch.RendezvousException;
import org.attn4j.distributed.transport.TransportException;
import org.attn4j.samples.bench.BenchCommand;
import org.attn4j.samples.check.CheckCommand;
import org.attn4j.samples.checkpoint.CheckpointCommand;
import org.attn4j.samples.hf.HfCommand;
import org.attn4j.samples.plan.PlanCommand;
import org.attn4j.samples.train.GenerateCommand;
import org.attn4j.samples.train.TrainCommand;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.IExecutionExceptionHandler;
import picocli.CommandLine.IParameterExceptionHandler;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParseResult;
import picocli.CommandLine.Spec;

/**
 * The {@code attn4j} command line: {@code attn4j check}, {@code attn4j bench}, {@code attn4j launch}, and later
 * {@code train}, {@code plan} and {@code generate}.
 *
 * <p>A new subcommand is a picocli {@code @Command} class listed in {@code subcommands} below. Commands
 * report a user's mistake by throwing {@link UserInputException}; it becomes one line on stderr and exit
 * code {@link #EXIT_BAD_INPUT}. Command-line syntax errors exit with {@link #EXIT_USAGE}, bugs with
 * {@link #EXIT_INTERNAL} and a stack trace; a job whose ranks could not meet, or whose peer failed, with
 * {@link #EXIT_JOB_FAILED} and one line.
 */
@Command(name = "attn4j", mixinStandardHelpOptions = true, versionProvider = Attn4jCli.Version.class,
        description = "Exact, memory-efficient and sequence-parallel attention for DL4J / ND4J.",
        subcommands = {TrainCommand.class, GenerateCommand.class, CheckCommand.class, BenchCommand.class,
            LaunchCommand.class, PlanCommand.class, CheckpointCommand.class, HfCommand.class,
            CommandLine.HelpCommand.class})
public final class Attn4jCli implements Runnable {

    /** Exit code of a bad input (file, shape, value): the command ran and refused it. */
    public static final int EXIT_BAD_INPUT = 1;
    /** Exit code of a command line picocli could not parse. */
    public static final int EXIT_USAGE = 2;
    /** Exit code of an unexpected failure (a bug): the stack trace is printed. */
    public static final int EXIT_INTERNAL = 70;
    /** Exit code when the ranks of a job could not meet, or another rank failed (one line on stderr). */
    public static final int EXIT_JOB_FAILED = 3;

    private static final String DL4J_CRASH_DUMPS = "org.deeplearning4j.crash.reporting.enabled";

    /**
     * Runs the CLI and exits with its exit code.
     *
     * @param args command-line arguments
     */
    public static void main(String[] args) {
        // The bench draws its chart with AWT; there is no display on the machines this runs on.
        System.setProperty("java.awt.headless", "true");
        // DL4J answers an OutOfMemoryError in fit() with a dump file in the working directory and three log lines;
        // the CLI says it in one line instead (unless the user asks for the dump).
        if (System.getProperty(DL4J_CRASH_DUMPS) == null) {
            System.setProperty(DL4J_CRASH_DUMPS, "false");
        }
        MemoryLimit.liftDefault();
        if (ModuleLayer.boot().findModule("jdk.incubator.vector").isEmpty()) {
            System.err.println("attn4j: note: this JVM runs without the Vector API module, so the attention kernel "
                    + "uses slower ND4J operations where its native tile code does not run (float64, CPUs without "
                    + "AVX-512); start it as java --add-modules jdk.incubator.vector -jar attn4j-cli.jar ...");
        }
        System.exit(commandLine().execute(args));
    }

    /**
     * The configured picocli command line, for {@link #main} and for tests that run commands in-process
     * (set its out/err writers to capture output).
     */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new Attn4jCli());
        cl.setCaseInsensitiveEnumValuesAllowed(true);
        cl.setParameterExceptionHandler(new OneLineUsageError());
        cl.setExecutionExceptionHandler(new OneLineUserError());
        cl.setExecutionStrategy(new ErrorsToHandler(new CommandLine.RunLast()));
        // launch --workers 2 bench transport --sizes ...: everything from the first positional on is the
        // workers' command, options included, with or without a "--" before it.
        cl.getSubcommands().get("launch").setStopAtPositional(true);
        return cl;
    }

    @Spec
    private CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing subcommand; one of "
                + String.join(", ", spec.subcommands().keySet()));
    }

    /** The command's name without the root, e.g. "check" or "bench attention", as a message prefix. */
    static String commandName(CommandLine cl) {
        String qualified = cl.getCommandSpec().qualifiedName(" ");
        String root = cl.getCommandSpec().root().name();
        return qualified.equals(root) ? root : qualified.substring(root.length() + 1);
    }

    private static String oneLine(String message) {
        return OutOfMemory.oneLine(message);
    }

    /** Syntax errors: one line with a pointer to --help instead of picocli's full usage text. */
    private static final class OneLineUsageError implements IParameterExceptionHandler {
        @Override
        public int handleParseException(ParameterException ex, String[] args) {
            CommandLine cl = ex.getCommandLine();
            PrintWriter err = cl.getErr();
            String name = commandName(cl);
            err.println(name + ": " + oneLine(ex.getMessage()) + " (see: attn4j "
                    + (name.equals("attn4j") ? "" : name + " ") + "--help)");
            err.flush();
            return EXIT_USAGE;
        }
    }

    /** User errors as one line; anything else is a bug and keeps its stack trace. */
    private static final class OneLineUserError implements IExecutionExceptionHandler {
        @Override
        public int handleExecutionException(Exception ex, CommandLine cl, ParseResult parseResult) {
            PrintWriter err = cl.getErr();
            if (ex instanceof UserInputException) {
                err.println(commandName(cl) + ": " + oneLine(ex.getMessage()));
                err.flush();
                return EXIT_BAD_INPUT;
            }
            String outOfMemory = OutOfMemory.in(ex);
            if (outOfMemory != null) {
                // JavaCPP's bound on resident memory (MemoryLimit) or the Java heap: a resource limit, not a bug.
                err.println(commandName(cl) + ": out of memory: " + outOfMemory + " (raise the bound with "
                        + "--memory-limit where the command has it, or -D" + MemoryLimit.PROPERTY + "=SIZE; or use a "
                        + "smaller batch or sequence length)");
                err.flush();
                return EXIT_JOB_FAILED;
            }
            for (Throwable t = ex; t != null; t = t.getCause()) {
                if (t instanceof RendezvousException || t instanceof TransportException) {
                    err.println(commandName(cl) + ": " + oneLine(t.getMessage()));
                    err.flush();
                    return EXIT_JOB_FAILED;
                }
            }
            err.println(commandName(cl) + ": internal error: " + ex);
            ex.printStackTrace(err);
            err.flush();
            return EXIT_INTERNAL;
        }
    }

    /**
     * Runs the command and hands an {@link OutOfMemoryError} to {@link OneLineUserError} too: picocli passes a
     * command's exceptions to the handler but lets errors through to {@code main}, and DL4J's {@code fit} rethrows
     * JavaCPP's error as it is (a stack trace and exit code 1 otherwise).
     */
    private record ErrorsToHandler(CommandLine.IExecutionStrategy inner) implements CommandLine.IExecutionStrategy {
        @Override
        public int execute(ParseResult parseResult) {
            try {
                return inner.execute(parseResult);
            } catch (OutOfMemoryError e) {
                ParseResult last = parseResult;
                while (last.hasSubcommand()) {
                    last = last.subcommand();
                }
                throw new CommandLine.ExecutionException(last.commandSpec().commandLine(), "out of memory", e);
            }
        }
    }

    /** The project version, from the build-filtered {@code version.properties}. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() throws IOException {
            Properties p = new Properties();
            try (InputStream in = Attn4jCli.class.getResourceAsStream("version.properties")) {
                if (in != null) {
                    p.load(in);
                }
            }
            return new String[] {"attn4j " + p.getProperty("version", "(unknown version)")};
        }
    }
}
