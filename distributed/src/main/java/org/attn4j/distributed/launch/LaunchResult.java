package org.attn4j.distributed.launch;

import java.time.Duration;
import java.util.Arrays;

/**
 * How a local launch ended.
 *
 * @param exitCode        0 if every worker exited with 0; else the exit code of the first worker to fail, or
 *                        {@link LocalLauncher#EXIT_TIMEOUT} if the global timeout struck first
 * @param firstFailedRank the first worker to exit non-zero, or -1
 * @param exitCodes       every worker's exit code, by rank
 * @param stopped         by rank: whether the launcher stopped the worker (after another failed, or at the
 *                        timeout) rather than it exiting by itself
 * @param timedOut        whether the global timeout struck
 * @param elapsed         from the first start to the last exit
 */
public record LaunchResult(int exitCode, int firstFailedRank, int[] exitCodes, boolean[] stopped, boolean timedOut,
                           Duration elapsed) {

    /** Copies the arrays. */
    public LaunchResult {
        exitCodes = exitCodes.clone();
        stopped = stopped.clone();
    }

    /** Every worker's exit code, by rank (a copy). */
    @Override
    public int[] exitCodes() {
        return exitCodes.clone();
    }

    /** By rank, whether the launcher stopped the worker (a copy). */
    @Override
    public boolean[] stopped() {
        return stopped.clone();
    }

    /** Whether every worker exited with 0. */
    public boolean succeeded() {
        return exitCode == 0;
    }

    /** One line, e.g. "rank 2 failed first with exit code 3; exit codes [1, 1, 3, 1]; 4.2 s". */
    @Override
    public String toString() {
        String head = timedOut ? "timed out" : firstFailedRank >= 0
                ? "rank " + firstFailedRank + " failed first with exit code " + exitCode : "all workers exited with 0";
        StringBuilder stoppedRanks = new StringBuilder();
        for (int r = 0; r < stopped.length; r++) {
            if (stopped[r]) {
                stoppedRanks.append(stoppedRanks.length() == 0 ? "" : ", ").append(r);
            }
        }
        return head + "; exit codes " + Arrays.toString(exitCodes)
                + (stoppedRanks.length() > 0 ? "; stopped by the launcher: " + stoppedRanks : "")
                + String.format(java.util.Locale.ROOT, "; %.1f s", elapsed.toMillis() / 1000.0);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof LaunchResult r && r.exitCode == exitCode && r.firstFailedRank == firstFailedRank
                && Arrays.equals(r.exitCodes, exitCodes) && Arrays.equals(r.stopped, stopped)
                && r.timedOut == timedOut && r.elapsed.equals(elapsed);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(exitCodes) * 31 + exitCode;
    }
}
