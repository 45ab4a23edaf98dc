package org.attn4j.samples.bench;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

/**
 * What a benchmark's worker processes report on stdout: a {@value #RESULT} line per result and a {@value #FAILED}
 * line saying why a worker gave up. The worker side prints them ({@link #fail}); the launching side collects them
 * ({@link #sink}).
 */
final class WorkerLines {

    /** The prefix of a result line. */
    static final String RESULT = "RESULT ";
    /** The prefix of a failure line. */
    static final String FAILED = "FAILED ";

    private final List<String> results = new CopyOnWriteArrayList<>();
    private final List<String> failures = new CopyOnWriteArrayList<>();

    /** A consumer of the workers' output lines (with or without the launcher's rank prefix). */
    Consumer<String> sink() {
        return line -> {
            int at = line.indexOf(RESULT);
            if (at >= 0) {
                results.add(line.substring(at + RESULT.length()).strip());
            }
            int failed = line.indexOf(FAILED);
            if (failed >= 0) {
                failures.add(line.substring(failed + FAILED.length()).strip());
            }
        };
    }

    /** The results, in the order they came. */
    List<String> results() {
        return results;
    }

    /** The first failure a worker reported, or {@code otherwise}. */
    String firstFailure(String otherwise) {
        return failures.isEmpty() ? otherwise : failures.get(0);
    }

    /** In a worker: prints why it failed, in one line, and exits 1. */
    static void fail(Throwable e) {
        Throwable root = e;
        while (root.getCause() != null && root.getCause() != root) {
            root = root.getCause();
        }
        System.out.println(FAILED + line(e) + (root == e ? "" : " (caused by " + line(root) + ")"));
        System.out.flush();
        System.exit(1);
    }

    private static String line(Throwable e) {
        return e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).lines().findFirst().orElse("");
    }
}
