package org.attn4j.models.hf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

import ai.djl.huggingface.tokenizers.Encoding;
import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;

/**
 * A model's {@code tokenizer.json}, run by Hugging Face's own tokenizers library (Rust, through DJL's JNI binding,
 * whose jar carries the native library: nothing is downloaded). Encoding adds no special tokens of its own, does not
 * truncate and does not pad, so that ids are exactly those of {@code Tokenizer.encode(text, add_special_tokens=False)}
 * in Python; special tokens written in the text are recognised.
 */
public final class HfTokenizer implements AutoCloseable {

    private final HuggingFaceTokenizer tokenizer;

    private HfTokenizer(HuggingFaceTokenizer tokenizer) {
        this.tokenizer = tokenizer;
    }

    /**
     * Loads {@code file} (a {@code tokenizer.json}) or {@code dir/tokenizer.json}.
     *
     * @throws IllegalArgumentException one line naming the file when it is missing or not a tokenizer
     */
    public static HfTokenizer load(Path path) throws IOException {
        Path file = Files.isDirectory(path) ? path.resolve("tokenizer.json") : path;
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException(path + ": no tokenizer.json");
        }
        try {
            return new HfTokenizer(HuggingFaceTokenizer.newInstance(file, Map.of("addSpecialTokens", "false",
                    "truncation", "false", "padding", "false")));
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(file + ": not a tokenizer Hugging Face tokenizers loads: "
                    + e.getMessage(), e);
        }
    }

    /** The ids of {@code text}. */
    public long[] encode(String text) {
        Encoding e = tokenizer.encode(text, false, false);
        return e.getIds();
    }

    /** The text of {@code ids}, without special tokens (as Python's {@code decode} by default). */
    public String decode(long[] ids) {
        return tokenizer.decode(ids, true);
    }

    @Override
    public void close() {
        tokenizer.close();
    }
}
