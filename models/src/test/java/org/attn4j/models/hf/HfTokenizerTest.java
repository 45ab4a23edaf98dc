package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * The byte-level BPE of {@code ../shared/fixtures/tokenizer-bpe}, trained by Hugging Face tokenizers, gives the ids
 * and the decoded text Python's {@code Tokenizer.encode(text).ids} and {@code decode} gave for every case (non-ASCII,
 * repeated spaces, a tab, a special token inside the text, the empty string).
 */
class HfTokenizerTest {

    @Test
    void idsAndDecodedTextEqualHuggingFaceTokenizersForEveryCase() throws Exception {
        Path dir = HfFixtureLogitsTest.fixtures().resolveSibling("tokenizer-bpe");
        Assumptions.assumeTrue(Files.isDirectory(dir), "no fixture at " + dir);
        JsonNode cases = new ObjectMapper().readTree(Files.readString(dir.resolve("cases.json")));
        assertTrue(cases.size() >= 5, "cases: " + cases.size());
        try (HfTokenizer t = HfTokenizer.load(dir.resolve("tokenizer.json"))) {
            for (JsonNode c : cases) {
                String text = c.get("text").asText();
                long[] expected = new long[c.get("ids").size()];
                for (int i = 0; i < expected.length; i++) {
                    expected[i] = c.get("ids").get(i).asLong();
                }
                long[] ids = t.encode(text);
                assertArrayEquals(expected, ids, "ids of " + text);
                assertEquals(c.get("decoded").asText(), t.decode(ids), "decoded " + text);
            }
        }
    }

    @Test
    void aMissingOrDamagedFileIsNamedInOneLine(@TempDir Path tmp) throws Exception {
        IllegalArgumentException missing = assertThrows(IllegalArgumentException.class, () -> HfTokenizer.load(tmp));
        assertTrue(missing.getMessage().contains("no tokenizer.json"), missing.getMessage());
        Files.writeString(tmp.resolve("tokenizer.json"), "{\"model\": 3}");
        IllegalArgumentException damaged = assertThrows(IllegalArgumentException.class, () -> HfTokenizer.load(tmp));
        assertTrue(damaged.getMessage().startsWith(tmp.resolve("tokenizer.json").toString()), damaged.getMessage());
    }
}
