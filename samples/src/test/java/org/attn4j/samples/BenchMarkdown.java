package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertTrue;

/** Checks on the shape of a benchmark's section of benchmarks.md. */
final class BenchMarkdown {

    private BenchMarkdown() {
    }

    /**
     * Asserts that the section titled {@code title} opens with one paragraph of method (the command, the
     * machine's cores, Java and ND4J versions, then sentences), followed by a table: no bullet lists before it.
     */
    static void assertMethodInOneParagraph(String md, String title) {
        String heading = "## " + title + "\n\n";
        int at = md.indexOf(heading);
        assertTrue(at >= 0, "no section " + title + " in\n" + md);
        String rest = md.substring(at + heading.length());
        int end = rest.indexOf("\n\n");
        assertTrue(end > 0, "nothing after the heading of " + title);
        String paragraph = rest.substring(0, end);
        assertTrue(paragraph.startsWith("`") && paragraph.contains(" cores (") && paragraph.contains(", Java ")
                && paragraph.contains(", ND4J "), "command and machine first: " + paragraph);
        assertTrue(!paragraph.contains("\n- ") && paragraph.endsWith("."), "one paragraph of sentences: " + paragraph);
        assertTrue(rest.substring(end + 2).startsWith("|"), "the table follows the paragraph in " + title + ":\n" + rest);
    }
}
