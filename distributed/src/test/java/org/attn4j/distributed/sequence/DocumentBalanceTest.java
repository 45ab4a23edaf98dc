package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.attn4j.ops.Documents;
import org.junit.jupiter.api.Test;

/** Work per worker of packed sequences under each layout. */
class DocumentBalanceTest {

    @Test
    void countsTheScoreEntriesThatTheMaskLeaves() {
        Documents docs = Documents.random(3, 2, 96, 20);
        for (SequenceLayout layout : SequenceLayout.values()) {
            for (boolean causal : new boolean[] {true, false}) {
                long[] pairs = new long[4];
                for (int w = 0; w < 4; w++) {
                    for (int i : layout.positions(w, 4, 96)) {
                        for (int j = 0; j < 96; j++) {
                            for (int b = 0; b < 2; b++) {
                                boolean same = docs.id(b, i) >= 0 && docs.id(b, i) == docs.id(b, j);
                                pairs[w] += same && (!causal || j <= i) ? 1 : 0;
                            }
                        }
                    }
                }
                assertArrayEquals(pairs, DocumentBalance.work(layout, docs, 4, causal), layout + " causal=" + causal);
            }
        }
    }

    @Test
    void stripedKeepsCausalWorkWithinTenPercentOfTheMeanForRandomDocuments() {
        int n = 32768;
        for (int p : new int[] {2, 4, 8}) {
            for (int longest : new int[] {128, 1024, 8192, n}) {
                for (long seed = 0; seed < 5; seed++) {
                    Documents docs = Documents.random(seed, 1, n, longest);
                    double spread = DocumentBalance.spread(DocumentBalance.work(SequenceLayout.STRIPED, docs, p, true));
                    assertTrue(spread <= 0.10, "P=" + p + ", documents up to " + longest + ", seed " + seed
                            + ": spread " + spread);
                }
            }
        }
    }
}
