package org.attn4j.samples;

import java.io.PrintWriter;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

import org.attn4j.distributed.launch.JobEnvironment;

import picocli.CommandLine.Model.CommandSpec;

/**
 * Whether a command runs as one rank of a job that a scheduler started (torchrun, Slurm's srun, mpirun, a
 * Kubernetes indexed Job, {@code attn4j launch}) instead of starting local worker processes itself: it does when
 * the environment names a rank and a world size larger than 1 (or an {@code ATTN4J_RANK}, which only a launcher
 * sets).
 */
public final class JobRank {

    private JobRank() {
    }

    /**
     * The job this process is a rank of, or empty to run as usual.
     *
     * @param spec    the command, to tell whether {@code --workers} was given
     * @param workers the value of {@code --workers}
     * @throws UserInputException if the variables are malformed, or {@code --workers} disagrees with the job
     */
    public static Optional<JobEnvironment> detect(CommandSpec spec, int workers) {
        return detect(System.getenv(), spec, workers);
    }

    static Optional<JobEnvironment> detect(Map<String, String> env, CommandSpec spec, int workers) {
        Optional<String> launcher = JobEnvironment.launcherOf(env);
        if (launcher.isEmpty()) {
            return Optional.empty();
        }
        JobEnvironment job;
        try {
            job = JobEnvironment.from(env);
        } catch (IllegalArgumentException e) {
            throw new UserInputException(launcher.get() + " environment: " + e.getMessage(), e);
        }
        if (job.worldSize() == 1 && !job.launcher().equals("attn4j")) {
            return Optional.empty();
        }
        if (spec.commandLine().getParseResult().hasMatchedOption("--workers") && workers != job.worldSize()) {
            throw new UserInputException("--workers " + workers + " disagrees with the " + job.launcher()
                    + " job of " + job.worldSize() + " ranks this process is rank " + job.rank() + " of; leave "
                    + "--workers out under a launcher");
        }
        return Optional.of(job);
    }

    /**
     * Writes the lines of local workers to {@code w} without the launcher's "[rank r] " prefix: for commands whose
     * rank 0 alone prints what the user reads.
     */
    public static Consumer<String> withoutRankPrefix(PrintWriter w) {
        return line -> {
            String text = line.startsWith("[rank ") && line.indexOf("] ") > 0 ? line.substring(line.indexOf("] ") + 2)
                    : line;
            synchronized (w) {
                w.println(text);
                w.flush();
            }
        };
    }
}
