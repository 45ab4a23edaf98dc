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

/** A tiny {@code attn4j bench transport} run writes its three files; the numbers themselves are not tested. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TransportBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesCsvChartAndMarkdownSection() throws Exception {
        CliRun run = CliRun.of("bench", "transport", "--min-size", "4k", "--max-size", "8k", "--ring-min-size", "16k",
                "--ring-max-size", "16k", "--ring-workers", "2,3", "--repeats", "2", "--heap", "512m",
                "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-transport.csv"));
        String all = String.join("\n", csv);
        assertEquals("kind,workers,bytes,median_us,gb_per_s,bus_gb_per_s", csv.get(0));
        assertEquals(1 + 2 * 2 + 2 * 2, csv.size(), all);       // 2 sizes x (latency, bandwidth); 2 rings x 2
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("p2p-bandwidth,2,8192,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("allgather,3,16380,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("reducescatter,2,16384,")), all);
        byte[] png = Files.readAllBytes(tmp.resolve("bench-transport.png"));
        assertArrayEquals(new byte[] {(byte) 0x89, 'P', 'N', 'G'}, Arrays.copyOf(png, 4));
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("| 8 KB | ") && !md.contains("Point-to-point bandwidth at 16 MB"), md);
        BenchMarkdown.assertMethodInOneParagraph(md, "Transport: Aeron between worker processes");
    }

    @Test
    void refusesBadSizes() {
        CliRun run = CliRun.of("bench", "transport", "--max-size", "lots", "--out", tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("--max-size must be a byte count such as 4096, 4k or 64m, got \"lots\""),
                run.err());
    }
}
