package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code attn4j launch}: runs main classes on P workers, returns the first failure, refuses bad input. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LaunchCommandTest {

    private static final String PROBE = LaunchProbe.class.getName();

    @Test
    void runsAMainClassOnEveryWorkerWithItsOptions() {
        CliRun r = CliRun.of("launch", "--workers", "2", "--heap", "64m", PROBE, "ok", "--not-an-option-of-launch");
        assertEquals(0, r.exitCode(), r.err());
        assertTrue(r.out().contains("[rank 0] worker 0 of 2 args ok --not-an-option-of-launch"), r.out());
        assertTrue(r.out().contains("[rank 1] worker 1 of 2 args ok --not-an-option-of-launch"), r.out());
    }

    @Test
    void returnsTheExitCodeOfTheFirstFailure() {
        CliRun r = CliRun.of("launch", "--workers", "3", "--heap", "64m", "--grace", "0.2", "--", PROBE, "fail", "2",
                "7");
        assertEquals(7, r.exitCode(), r.err());
        assertTrue(r.err().contains("launch: rank 2 failed first with exit code 7"), r.err());
    }

    @Test
    void refusesWhatIsNeitherSubcommandNorMainClass() {
        CliRun r = CliRun.of("launch", "--workers", "2", "nonsense");
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode());
        assertEquals(1, r.errLines().length, r.err());
        assertTrue(r.err().startsWith("launch: 'nonsense' is neither an attn4j subcommand (bench, check, checkpoint, "
                + "generate, hf, plan, train)"), r.err());
    }

    @Test
    void refusesBadWorkerCountsAndLaunchingItself() {
        CliRun zero = CliRun.of("launch", "--workers", "0", PROBE, "ok");
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, zero.exitCode());
        assertTrue(zero.err().contains("--workers must be in [1, 256], got 0"), zero.err());
        CliRun self = CliRun.of("launch", "--workers", "2", "launch", "--workers", "2", PROBE);
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, self.exitCode());
        assertTrue(self.err().contains("'launch' cannot run as a worker"), self.err());
        CliRun missing = CliRun.of("launch", PROBE);
        assertEquals(Attn4jCli.EXIT_USAGE, missing.exitCode());
    }
}
