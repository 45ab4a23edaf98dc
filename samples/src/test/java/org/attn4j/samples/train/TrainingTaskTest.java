package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

import org.attn4j.distributed.training.Packing;
import org.attn4j.ops.Documents;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;

/** Packed and padded batches: document ids by position, and no prediction scored across two documents. */
class TrainingTaskTest {

    @TempDir
    Path tmp;

    @Test
    void packedTextFillsSequencesWithWholeDocumentsAndScoresOnlyInsideThem() throws Exception {
        Path text = tmp.resolve("t.txt");
        Files.writeString(text, "alpha beta.\n\ngamma\n \ndelta epsilon zeta.\n\n\n\neta");
        for (boolean pack : new boolean[] {true, false}) {
            TrainingTask t = TrainingTask.textDocuments(text, null, pack);
            assertTrue(t.name().contains("4 documents"), t.name());
            DataSet b = t.batch(new Random(1), 6, 40, DataType.FLOAT);
            Documents d = Packing.of(b);
            assertNotNull(d);
            INDArray mask = b.getLabelsMaskArray();
            for (int i = 0; i < 6; i++) {
                int padding = 0;
                for (int p = 0; p < 40; p++) {
                    padding += d.isPadding(i, p) ? 1 : 0;
                    boolean inside = p + 1 < 40 && !d.isPadding(i, p) && d.id(i, p) == d.id(i, p + 1);
                    if (!inside && p + 1 < 40) {
                        assertEquals(0.0, mask.getDouble(i, p), "sequence " + i + " scores position " + p
                                + " across documents or in padding");
                    }
                }
                assertEquals(pack, padding == 0, "sequence " + i + " (pack=" + pack + ") has " + padding
                        + " padded positions");
            }
        }
        TrainingTask custom = TrainingTask.textDocuments(text, "ta", true);
        assertTrue(custom.name().contains("documents"), custom.name());
    }

    @Test
    void packedPasskeyHidesOneKeyPerDocumentAndScoresItsAnswers() {
        TrainingTask t = TrainingTask.packed(TrainingTask.passkey(3), 10);
        DataSet b = t.batch(new Random(2), 8, 128, DataType.FLOAT);
        Documents d = Packing.of(b);
        INDArray features = b.getFeatures();
        INDArray mask = b.getLabelsMaskArray();
        for (int i = 0; i < 8; i++) {
            int keys = 0;
            int documents = 0;
            for (int p = 0; p < 128; p++) {
                documents += p == 0 || d.id(i, p) != d.id(i, p - 1) ? 1 : 0;
                keys += features.getDouble(i, 0, p) == 13 ? 1 : 0;          // the KEY token
                if (p + 1 < 128 && d.id(i, p) != d.id(i, p + 1)) {
                    assertEquals(0.0, mask.getDouble(i, p), "scored across documents at " + p);
                }
            }
            assertTrue(documents >= 2, "sequence " + i + " packs " + documents + " documents");
            assertTrue(keys >= documents - 1, "a key per whole document: " + keys + " keys, " + documents + " docs");
        }
    }
}
