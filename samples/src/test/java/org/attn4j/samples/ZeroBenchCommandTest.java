package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * ZeRO's saving, measured: {@code attn4j bench zero --workers 2} trains a 24 M-parameter model (float32, Adam) in
 * worker processes and reads the off-heap memory each worker's process holds between the steps of an epoch. At
 * W = 2, against the one-worker run of the same stage and against stage 0 at W = 2, the median worker holds less by
 * at least 90 % of the ideal saving, half (1 - 1/W) of Adam's state (stage 1 and up), of the gradient (stage 2 and
 * up) and of the parameters (stage 3). After {@code fit} has returned with the network whole, stage 3 still holds
 * less than stage 0 by 90 % of half of Adam's state and the gradient.
 */
@Timeout(value = 900, unit = TimeUnit.SECONDS)
class ZeroBenchCommandTest {

    private static final int W = 2;
    /** 90 % of the ideal saving at W = 2, which is half of what a stage shards. */
    private static final double MARGIN = 0.9 * (1 - 1.0 / W);

    @TempDir
    Path tmp;

    @Test
    void measuredOffHeapBytesPerWorkerFallByWhatEachStageShards() throws Exception {
        CliRun run = CliRun.of("bench", "zero", "--workers", Integer.toString(W), "--steps", "1", "--readings", "2",
                "--jobs", "2", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-zero.csv"));
        assertEquals("workers,zero_stage,params,optimizer_state_bytes,gradient_bytes,current_parameter_bytes,"
                + "measured_offheap_bytes,measured_offheap_bytes_w1,measured_offheap_bytes_after_fit,step_us",
                csv.get(0));
        assertEquals(1 + 4 * 2, csv.size(), String.join("\n", csv));
        long params = Long.parseLong(csv.get(1).split(",")[2]);
        assertTrue(params >= 20_000_000, "a model where parameters and Adam state dominate: " + params);
        double adam = 2.0 * 4 * params;            // float32 m and v
        double gradient = 4.0 * params;
        double parameters = 4.0 * params;
        double[] sharded = {0, adam, adam + gradient, adam + gradient + parameters};
        long stage0 = measured(csv, W, 0);
        for (int stage = 1; stage <= 3; stage++) {
            long atW = measured(csv, W, stage);
            long one = measured(csv, 1, stage);
            String figures = "stage " + stage + ": W=" + W + " " + atW / 1e6 + " MB, W=1 " + one / 1e6 + " MB, stage 0"
                    + " at W=" + W + " " + stage0 / 1e6 + " MB, 90 % of the ideal saving " + MARGIN * sharded[stage] / 1e6
                    + " MB\n" + String.join("\n", csv);
            assertTrue(atW <= one - MARGIN * sharded[stage], figures);
            assertTrue(atW <= stage0 - MARGIN * sharded[stage], figures);
        }
        long wholeAfterFit = Long.parseLong(row(csv, W, 3)[8]);
        long stage0AfterFit = Long.parseLong(row(csv, W, 0)[8]);
        assertTrue(wholeAfterFit <= stage0AfterFit - MARGIN * sharded[2], "after fit returned, stage 3 at W=2 "
                + wholeAfterFit / 1e6 + " MB, stage 0 " + stage0AfterFit / 1e6 + " MB\n" + String.join("\n", csv));
        for (String line : csv.subList(1, csv.size())) {
            assertTrue(Long.parseLong(line.split(",")[9]) > 0, "a step takes time: " + line);
        }
        BenchMarkdown.assertMethodInOneParagraph(Files.readString(tmp.resolve("benchmarks.md")),
                "ZeRO: memory per worker");
    }

    private static long measured(List<String> csv, int workers, int stage) {
        String[] f = row(csv, workers, stage);
        assertEquals(row(csv, 1, stage)[6], f[7], "measured_offheap_bytes_w1 is the W=1 run's");
        return Long.parseLong(f[6]);
    }

    private static String[] row(List<String> csv, int workers, int stage) {
        for (String line : csv.subList(1, csv.size())) {
            String[] f = line.split(",");
            if (Integer.parseInt(f[0]) == workers && Integer.parseInt(f[1]) == stage) {
                return f;
            }
        }
        throw new AssertionError("no row for " + workers + " workers, stage " + stage);
    }
}
