package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A tiny {@code attn4j bench attention} run writes its three files; the numbers themselves are not tested. */
class AttentionBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesCsvChartAndMarkedMarkdownSection() throws IOException {
        Path md = tmp.resolve("benchmarks.md");
        Files.writeString(md, "# Benchmarks\n\nhand-written intro\n\n<!-- bench:attention:start -->\nold table\n"
                + "<!-- bench:attention:end -->\n\n<!-- bench:ring:start -->\nring table\n<!-- bench:ring:end -->\n");
        CliRun run = CliRun.of("bench", "attention", "--min-n", "64", "--max-n", "128", "--stock-max-n", "64",
                "--repeats", "2", "--repeat-max-n", "64", "--gemm-size", "128", "--warm-up", "0.5", "--settle", "0.05",
                "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());

        List<String> csv = Files.readAllLines(tmp.resolve("bench-attention.csv"));
        String all = String.join("\n", csv);
        assertEquals("n,impl,causal,pass,status,median_ms,repeats,peak_increase_bytes,note", csv.get(0));
        // Per N: attn4j 2 masks x 2 passes, stock 2 passes, floor 2 masks x 2 passes.
        assertEquals(1 + 2 * (4 + 2 + 4), csv.size(), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("64,attn4j,false,fwd,ok,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("128,attn4j,true,fwd+bwd,ok,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("64,nd4j-stock,false,fwd,ok,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("128,nd4j-stock,false,fwd,skipped,")
                && l.contains("needs ~0.07 MB for the N x N score matrix (above --stock-max-n 64)")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("128,nd4j-stock,false,fwd+bwd,skipped,")
                && l.contains("needs ~0.33 MB for 5 N x N score matrices")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("128,floor,false,fwd+bwd,ok,")), all);

        byte[] png = Files.readAllBytes(tmp.resolve("bench-attention.png"));
        assertArrayEquals(new byte[] {(byte) 0x89, 'P', 'N', 'G'}, Arrays.copyOf(png, 4));

        String text = Files.readString(md);
        assertTrue(text.startsWith("# Benchmarks\n\nhand-written intro\n"), text);
        assertTrue(text.contains("<!-- bench:ring:start -->\nring table\n<!-- bench:ring:end -->"), text);
        assertTrue(!text.contains("old table"), text);
        String section = text.substring(text.indexOf("<!-- bench:attention:start -->"),
                text.indexOf("<!-- bench:attention:end -->"));
        assertTrue(section.contains("| 64 | none | "), section);
        assertTrue(section.contains("| 128 | causal | "), section);
        assertTrue(section.contains("bench-attention.png"), section);
        BenchMarkdown.assertMethodInOneParagraph(section, "Attention: attn4j vs ND4J's stock op");
        assertTrue(section.contains("attn4j first runs for 0.5 s at the smallest N") && section.contains(
                "after at least 50 ms of untimed runs"), "the method names the warm-up that ran\n" + section);
    }

    @Test
    void heads_batch_andAFakeLibtorchAnchorGoIntoTheirOwnSectionWithRatios() throws IOException {
        // A stand-in for the anchor: prints its CSV for the N it is asked, as the real run.sh does.
        Path anchor = Files.createDirectories(tmp.resolve("anchor"));
        Files.writeString(anchor.resolve("run.sh"), "#!/usr/bin/env bash\n"
                + "n=$(printf '%s\\n' \"$@\" | sed -n 's/^-Dns=//p')\n"
                + "h=$(printf '%s\\n' \"$@\" | sed -n 's/^-Dheads=//p')\n"
                + "echo 'building' >&2\n"
                + "echo impl,threads,N,causal,fwd_ms,fwdbwd_ms\n"
                + "echo libtorch-2.7.1-sdpa-H$h,2,$n,false,1000.00,3000.00\n"
                + "echo libtorch-2.7.1-sdpa-H$h,2,$n,true,0.01,0.02\n");
        CliRun run = CliRun.of("bench", "attention", "--min-n", "64", "--max-n", "128", "--heads", "2",
                "--stock-max-n", "64", "--repeats", "1", "--repeat-max-n", "64", "--gemm-size", "64",
                "--compare-libtorch", anchor.toString(), "--warm-up", "0.5", "--settle", "0.05", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-attention-b1-h2.csv"));
        String all = String.join("\n", csv);
        assertTrue(csv.contains("128,libtorch,false,fwd+bwd,ok,3000.000,3,,"), all);
        assertTrue(csv.contains("64,libtorch,true,fwd,ok,0.010,3,,"), all);
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        String title = "Attention: attn4j vs ND4J's stock op and PyTorch's fused kernel (B = 1, H = 2)";
        BenchMarkdown.assertMethodInOneParagraph(md, title);
        assertTrue(md.contains("<!-- bench:attention-b1-h2:start -->") && md.contains("attn4j / libtorch fwd+bwd"), md);
        // attn4j beats 1000 ms at N = 128 and loses to 0.01 ms: full rows faster, causal rows slower.
        assertTrue(md.contains("- Against libtorch: attn4j faster in 4 of the 8 configurations where both ran."), md);

        CliRun batch = CliRun.of("bench", "attention", "--batch", "2", "--compare-libtorch", anchor.toString(),
                "--out", tmp.toString());
        assertEquals(1, batch.exitCode());
        assertEquals("bench attention: --compare-libtorch times B = 1 only (the anchor's shapes), got --batch 2",
                batch.err().strip());
    }

    @Test
    void batchOfTwoRunsEveryImplementation() throws IOException {
        CliRun run = CliRun.of("bench", "attention", "--min-n", "64", "--max-n", "64", "--batch", "2", "--heads", "3",
                "--repeats", "1", "--repeat-max-n", "64", "--gemm-size", "64", "--warm-up", "0.5", "--settle", "0.05",
                "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-attention-b2-h3.csv"));
        String all = String.join("\n", csv);
        for (String impl : new String[] {"attn4j", "nd4j-stock"}) {
            assertTrue(csv.stream().anyMatch(l -> l.startsWith("64," + impl + ",false,fwd+bwd,ok,")), all);
        }
    }
}
