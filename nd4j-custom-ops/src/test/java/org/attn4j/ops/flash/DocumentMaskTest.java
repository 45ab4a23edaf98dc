package org.attn4j.ops.flash;

import static org.attn4j.ops.flash.FlashAttentionTest.checkAgainstReference;
import static org.attn4j.ops.flash.FlashAttentionTest.inEveryTilePath;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.attn4j.ops.Documents;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Packed sequences in the flash op: attention only within each document, padding seeing and seen by nothing. */
class DocumentMaskTest {

    @Test
    void matchesTheReferenceWithDocumentsAndPaddingInEveryTilePath() {
        Documents docs = Documents.random(7, 2, 600, 150);
        AttentionMask[] masks = {
            AttentionMask.builder().documents(docs).build(),
            AttentionMask.builder().causal(true).documents(docs).build(),
            AttentionMask.builder().causal(true).window(60).documents(docs).build()};
        FlashAttention[] ops = {FlashAttention.withTiles(32, 48, 2), FlashAttention.withTiles(256, 192, 2)};
        for (AttentionMask mask : masks) {
            for (FlashAttention op : ops) {
                checkAgainstReference(31, DataType.DOUBLE, 2, 4, 2, 600, 600, 16, mask, 1e-12, op);
                inEveryTilePath(() -> checkAgainstReference(32, DataType.FLOAT, 2, 4, 2, 600, 600, 16, mask, 1e-5, op));
            }
        }
    }

    @Test
    void shardedPositionsLookUpTheirIdsByGlobalPosition() {
        // A zigzag shard's queries against a striped set of keys: ids are read at the global positions given.
        int n = 400;
        Documents docs = Documents.random(11, 2, n, 90);
        int[] qPos = new int[100];
        for (int i = 0; i < 50; i++) {
            qPos[i] = 50 + i;
            qPos[50 + i] = 300 + i;
        }
        int[] kPos = new int[200];
        for (int j = 0; j < 200; j++) {
            kPos[j] = 2 * j + 1;
        }
        AttentionMask mask = AttentionMask.builder().causal(true).queryPositions(qPos).keyPositions(kPos)
                .documents(docs).build();
        checkAgainstReference(41, DataType.DOUBLE, 2, 2, 1, 100, 200, 8, mask, 1e-12, FlashAttention.withTiles(32, 48, 2));
    }

    @Test
    void paddedQueriesGiveZeroOutputMinusInfinityLseAndZeroGradients() {
        Documents docs = Documents.packed(1, 64, 20, 30);          // positions 50..63 are padding
        INDArray q = Arrays4.randn(1, DataType.DOUBLE, 1, 2, 64, 8);
        INDArray k = Arrays4.randn(2, DataType.DOUBLE, 1, 2, 64, 8);
        INDArray v = Arrays4.randn(3, DataType.DOUBLE, 1, 2, 64, 8);
        INDArray g = Arrays4.randn(4, DataType.DOUBLE, 1, 2, 64, 8);
        AttentionMask mask = AttentionMask.builder().causal(true).documents(docs).build();
        FlashAttention op = FlashAttention.withTiles(16, 16, 2);
        AttentionOutput out = op.forward(q, k, v, mask, 0.3);
        AttentionGradients grad = op.backward(q, k, v, out.output(), out.lse(), g, mask, 0.3);
        for (int h = 0; h < 2; h++) {
            for (int i = 50; i < 64; i++) {
                assertEquals(Double.NEGATIVE_INFINITY, out.lse().getDouble(0, h, i), "LSE of padded query " + i);
                for (int c = 0; c < 8; c++) {
                    assertEquals(0.0, out.output().getDouble(0, h, i, c), "O of padded query " + i);
                    assertEquals(0.0, grad.dq().getDouble(0, h, i, c), "dQ of padded query " + i);
                    assertEquals(0.0, grad.dk().getDouble(0, h, i, c), "dK of padded key " + i);
                    assertEquals(0.0, grad.dv().getDouble(0, h, i, c), "dV of padded key " + i);
                }
            }
        }
        // A query of the second document is unchanged when the first document's keys change.
        INDArray k2 = k.dup();
        k2.get(org.nd4j.linalg.indexing.NDArrayIndex.all(), org.nd4j.linalg.indexing.NDArrayIndex.all(),
                org.nd4j.linalg.indexing.NDArrayIndex.interval(0, 20)).muli(3);
        AttentionOutput out2 = op.forward(q, k2, v, mask, 0.3);
        assertEquals(out.output().getDouble(0, 1, 35, 3), out2.output().getDouble(0, 1, 35, 3), 0.0);
    }

    @Test
    void tilesWhoseQueriesAndKeysShareNoDocumentAreSkipped() {
        int n = 32768;
        int[] lengths = new int[8];
        java.util.Arrays.fill(lengths, n / 8);
        AttentionMask mask = AttentionMask.builder().causal(true).documents(Documents.packed(1, n, lengths)).build();
        AttentionShapes s = new AttentionShapes(1, 1, 1, n, n, 64, DataType.FLOAT);
        TilePlan plan = new TilePlan(mask, s, 256, 512);
        int computed = 0;
        for (int qb = 0; qb < plan.queryBlocks; qb++) {
            for (int kb = 0; kb < plan.keyBlocks; kb++) {
                if (plan.kind(0, qb, kb) != TilePlan.Kind.SKIP) {
                    computed++;
                    assertEquals(qb * 256 / (n / 8), kb * 512 / (n / 8), "tile " + qb + ", " + kb + " crosses documents");
                }
            }
        }
        // Per document of 4096: 16 query blocks of 256 against the key blocks of 512 up to their diagonal.
        int perDocument = 0;
        for (int qb = 0; qb < 16; qb++) {
            perDocument += qb / 2 + 1;
        }
        assertEquals(8 * perDocument, computed);
    }

    @Test
    void badIdsAreRefusedInOneLine() {
        IllegalArgumentException split = assertThrows(IllegalArgumentException.class,
                () -> Documents.of(new int[][] {{0, 0, 1, 1, 0}}));
        assertTrue(split.getMessage().contains("document id 0 of sequence 0 appears in two separate runs"),
                split.getMessage());
        IllegalArgumentException type = assertThrows(IllegalArgumentException.class,
                () -> Documents.of(Nd4j.zeros(DataType.FLOAT, 1, 8)));
        assertTrue(type.getMessage().contains("expected INT or LONG ids (int32 or int64), got FLOAT"), type.getMessage());
        IllegalArgumentException rank = assertThrows(IllegalArgumentException.class,
                () -> Documents.of(Nd4j.zeros(DataType.INT, 8)));
        assertTrue(rank.getMessage().contains("expected ids of shape [B, N]"), rank.getMessage());
        INDArray q = Arrays4.randn(1, DataType.DOUBLE, 2, 1, 16, 8);
        IllegalArgumentException size = assertThrows(IllegalArgumentException.class,
                () -> FlashAttention.defaults().forward(q, q, q,
                        AttentionMask.builder().documents(Documents.packed(2, 15, 15)).build(), 1.0));
        assertTrue(size.getMessage().contains("document ids must have shape [2, 16] (batch, positions), got [2, 15]"),
                size.getMessage());
        IllegalArgumentException batch = assertThrows(IllegalArgumentException.class,
                () -> FlashAttention.defaults().forward(q, q, q,
                        AttentionMask.builder().documents(Documents.packed(1, 16, 16)).build(), 1.0));
        assertTrue(batch.getMessage().contains("document ids cover 1 sequences, q has 2"), batch.getMessage());
    }
}
