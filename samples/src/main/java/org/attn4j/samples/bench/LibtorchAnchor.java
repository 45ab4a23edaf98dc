package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

import org.attn4j.samples.bench.BenchResult.Impl;
import org.attn4j.samples.bench.BenchResult.Pass;
import org.attn4j.samples.bench.BenchResult.Status;

/**
 * PyTorch's CPU {@code scaled_dot_product_attention} (its fused flash-attention kernel), timed by an anchor that
 * lives outside this project: a directory whose {@code run.sh} builds and runs it and prints CSV lines
 * {@code impl,threads,N,causal,fwd_ms,fwdbwd_ms} (median of its timed runs). attn4j does not depend on it; the
 * attention benchmark runs it in its own process next to attn4j's own runs, one N at a time.
 */
final class LibtorchAnchor {

    /** Long enough for the anchor's build on first use and its runs at N = 32768. */
    private static final long TIMEOUT_MINUTES = 60;
    /** Timed runs behind each of the anchor's medians. */
    private static final int ANCHOR_REPEATS = 3;

    private final Path dir;
    private final PrintWriter log;

    LibtorchAnchor(Path dir, PrintWriter log) {
        this.dir = dir;
        this.log = log;
    }

    /** The script this directory must hold. */
    static Path script(Path dir) {
        return dir.resolve("run.sh");
    }

    /**
     * Runs the anchor at N = {@code n} with {@code heads} heads (B = 1), full and causal, forward and (unless
     * {@code forwardOnly}) forward+backward, on as many threads as this machine has cores; returns its rows,
     * or failed rows saying why.
     */
    List<BenchResult> run(int n, int heads, boolean forwardOnly) {
        int threads = Runtime.getRuntime().availableProcessors();
        List<String> command = List.of("bash", script(dir).toString(), "-Dns=" + (forwardOnly ? "" : n),
                "-Dfwdonly=" + (forwardOnly ? n : ""), "-Dt1ns=", "-Dheads=" + heads, "-Dthreads=" + threads);
        List<BenchResult> rows = new ArrayList<>();
        String failure;
        try {
            Path err = Files.createTempFile("attn4j-libtorch", ".err");
            try {
                Process p = new ProcessBuilder(command).directory(dir.toFile())
                        .redirectError(err.toFile()).start();
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                boolean done = p.waitFor(TIMEOUT_MINUTES, TimeUnit.MINUTES);
                if (!done) {
                    p.destroyForcibly();
                }
                parse(out, n, forwardOnly, rows);
                failure = !done ? "the libtorch anchor did not finish within " + TIMEOUT_MINUTES + " minutes"
                        : p.exitValue() != 0 ? "the libtorch anchor exited with " + p.exitValue() + ": "
                        + lastLine(Files.readString(err, StandardCharsets.UTF_8))
                        : rows.isEmpty() ? "the libtorch anchor printed no row for N = " + n : null;
            } finally {
                Files.deleteIfExists(err);
            }
        } catch (IOException e) {
            failure = "could not run " + script(dir) + ": " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failure = "interrupted";
        }
        if (failure != null) {
            rows.clear();
            for (boolean causal : new boolean[] {false, true}) {
                for (Pass pass : Pass.values()) {
                    rows.add(BenchResult.notRun(n, Impl.LIBTORCH, causal, pass, Status.FAILED, "failed: " + failure));
                }
            }
        }
        for (BenchResult r : rows) {
            log.printf(Locale.ROOT, "N=%-6d %-10s %-6s %-7s %s%n", r.n(), r.impl().label(),
                    r.causal() ? "causal" : "full", r.pass().label(), r.status() == Status.OK
                            ? String.format(Locale.ROOT, "%10.1f ms", r.medianMs()) : r.note());
        }
        log.flush();
        return rows;
    }

    /** The rows of {@code out} for N = {@code n}: one forward and one forward+backward per mask. */
    static void parse(String out, int n, boolean forwardOnly, List<BenchResult> rows) {
        for (String line : out.split("\\R")) {
            String[] f = line.strip().split(",");
            if (f.length != 6 || !f[0].startsWith("libtorch") || !f[2].equals(Integer.toString(n))) {
                continue;
            }
            boolean causal = Boolean.parseBoolean(f[3]);
            rows.add(BenchResult.ok(n, Impl.LIBTORCH, causal, Pass.FORWARD, Double.parseDouble(f[4]),
                    ANCHOR_REPEATS, -1));
            rows.add(forwardOnly || f[5].equals("NaN")
                    ? BenchResult.notRun(n, Impl.LIBTORCH, causal, Pass.FORWARD_BACKWARD, Status.SKIPPED,
                            "skipped: forward only at this N")
                    : BenchResult.ok(n, Impl.LIBTORCH, causal, Pass.FORWARD_BACKWARD, Double.parseDouble(f[5]),
                            ANCHOR_REPEATS, -1));
        }
    }

    private static String lastLine(String text) {
        String[] lines = text.strip().split("\\R");
        return lines.length == 0 || lines[lines.length - 1].isBlank() ? "no message" : lines[lines.length - 1].strip();
    }
}
