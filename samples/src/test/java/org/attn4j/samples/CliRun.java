package org.attn4j.samples;

import java.io.PrintWriter;
import java.io.StringWriter;

import picocli.CommandLine;

/**
 * One in-process run of the CLI, with its exit code and what it printed.
 *
 * @param exitCode the exit code {@code main} would exit with
 * @param out      stdout text
 * @param err      stderr text
 */
public record CliRun(int exitCode, String out, String err) {

    /** Runs {@code attn4j ARGS} in this JVM through the same command line {@code main} uses. */
    public static CliRun of(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        CommandLine cl = Attn4jCli.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int code = cl.execute(args);
        return new CliRun(code, out.toString(), err.toString());
    }

    /** The lines printed on stderr. */
    public String[] errLines() {
        return err.isEmpty() ? new String[0] : err.split("\\R");
    }
}
