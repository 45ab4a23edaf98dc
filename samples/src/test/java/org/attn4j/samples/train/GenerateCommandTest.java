package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.attn4j.samples.Attn4jCli;
import org.attn4j.samples.CliRun;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code attn4j generate} continues a prompt with a text model {@code attn4j train --text} wrote. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class GenerateCommandTest {

    @TempDir
    Path tmp;

    @Test
    void aModelTrainedOnARepeatedLineContinuesIt() throws Exception {
        Path text = tmp.resolve("corpus.txt");
        Files.writeString(text, "the cat sat on the mat. ".repeat(200));
        Path run = tmp.resolve("run");
        CliRun train = CliRun.of("train", "--text", text.toString(), "--seq-len", "32", "--steps", "150",
                "--d-model", "32", "--layers", "1", "--out", run.toString());
        assertEquals(0, train.exitCode(), train.err());
        CliRun gen = CliRun.of("generate", "--checkpoint", run.toString(), "--prompt", "the cat sat on the",
                "--length", "24", "--temperature", "0");
        assertEquals(0, gen.exitCode(), gen.err());
        String out = gen.out().strip();
        assertTrue(out.startsWith("the cat sat on the"), out);
        assertTrue(out.contains("mat"), "greedy continuation should reproduce the corpus: " + out);
    }

    @Test
    void refusesAModelOfASyntheticTask() throws Exception {
        Path run = tmp.resolve("passkey");
        assertEquals(0, CliRun.of("train", "--steps", "2", "--seq-len", "16", "--out", run.toString()).exitCode());
        CliRun gen = CliRun.of("generate", "--checkpoint", run.toString(), "--prompt", "hello");
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, gen.exitCode());
        assertTrue(gen.err().contains("generate needs a text model"), gen.err());
    }
}
