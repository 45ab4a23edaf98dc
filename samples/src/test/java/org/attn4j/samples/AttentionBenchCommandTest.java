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
                "--repeats", "2", "--repeat-max-n", "64", "--gemm-size", "128", "--out", tmp.toString());
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
    }
}
