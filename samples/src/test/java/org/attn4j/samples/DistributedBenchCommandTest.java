package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A tiny {@code attn4j bench distributed} run writes its files, and the bytes it reports are the ring's formula;
 * the times themselves are not tested.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class DistributedBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesCsvChartsAndMarkdownSectionWithTheRingsBytes() throws Exception {
        CliRun run = CliRun.of("bench", "distributed", "--workers", "1,2", "--lengths", "64", "--repeats", "1",
                "--algos", "ring,lasp", "--heads", "4", "--kv-heads", "2", "--dim", "8", "--heap", "512m",
                "--warm-up", "0.2", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-distributed.csv"));
        String all = String.join("\n", csv);
        assertEquals("algo,workers,n,config,forward_ms,backward_ms,max_bytes_per_rank,mean_bytes_per_rank",
                csv.get(0));
        assertEquals(1 + 2 * 2, csv.size(), all);              // 2 algorithms x 2 worker counts x 1 length
        // Ring, P = 2: a K/V shard is X_kv = 1 * 2 * 32 * 8 * 4 bytes; forward (P-1) 2 X_kv, backward
        // (P-1) 2 X_kv + P 2 X_kv: 8 X_kv = 16384 bytes per rank.
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("ring,2,64,zigzag,") && l.endsWith(",16384,16384.0")),
                all);
        // LASP, P = 2: one D x D state per query head each way, 4 * 8 * 8 * 4 bytes, sent by one rank each way.
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("lasp,2,64,contiguous,") && l.endsWith(",1024,1024.0")),
                all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("ring,1,64,zigzag,") && l.endsWith(",0,0.0")), all);
        for (String png : new String[] {"bench-distributed.png", "bench-distributed-bytes.png"}) {
            byte[] bytes = Files.readAllBytes(tmp.resolve(png));
            assertArrayEquals(new byte[] {(byte) 0x89, 'P', 'N', 'G'}, Arrays.copyOf(bytes, 4), png);
        }
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("| ring | 2 | zigzag | 64 |"), md);
        assertTrue(md.contains("once every worker has run the local attention op untimed for 0.2 s"),
                "the method names the warm-up that ran\n" + md);
        BenchMarkdown.assertMethodInOneParagraph(md, "Sequence-parallel attention over worker processes");
    }

    @Test
    void refusesAnUnknownAlgorithm() {
        CliRun run = CliRun.of("bench", "distributed", "--algos", "ring,torus", "--out", tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("unknown sequence-parallel algorithm 'torus'"), run.err());
    }
}
