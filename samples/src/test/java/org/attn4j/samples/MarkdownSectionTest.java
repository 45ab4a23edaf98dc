package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.attn4j.samples.bench.MarkdownSection;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Benchmarks share benchmarks.md: each replaces only its own marked section. */
class MarkdownSectionTest {

    @TempDir
    Path tmp;

    @Test
    void createsTheFileThenAppendsThenReplacesOnlyItsSection() throws IOException {
        Path md = tmp.resolve("benchmarks.md");
        MarkdownSection.replace(md, "attention", "table A1");
        MarkdownSection.replace(md, "ring", "table R1");
        MarkdownSection.replace(md, "attention", "table A2\n");
        String text = Files.readString(md);
        assertTrue(text.startsWith("# Benchmarks\n"), text);
        assertTrue(text.endsWith("<!-- bench:attention:start -->\ntable A2\n<!-- bench:attention:end -->\n\n"
                + "<!-- bench:ring:start -->\ntable R1\n<!-- bench:ring:end -->\n"), text);
        assertEquals(1, text.split("bench:attention:start", -1).length - 1, text);
    }

    @Test
    void refusesAStartMarkerWithoutAnEnd() throws IOException {
        Path md = tmp.resolve("benchmarks.md");
        Files.writeString(md, "<!-- bench:attention:start -->\nhalf a section\n");
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> MarkdownSection.replace(md, "attention", "x"));
        assertTrue(e.getMessage().contains("no <!-- bench:attention:end -->"), e.getMessage());
    }
}
