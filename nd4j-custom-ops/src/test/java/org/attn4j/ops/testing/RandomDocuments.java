package org.attn4j.ops.testing;

import java.util.Arrays;
import java.util.Random;

import org.attn4j.ops.Documents;

/** Seeded packed sequences for tests: documents of random lengths, with runs of padding between some of them. */
public final class RandomDocuments {

    private RandomDocuments() {
    }

    /**
     * Per sequence, documents of 1..maxLength positions one after another; about one run in five is padding.
     *
     * @param seed      the seed; equal seeds give equal tables
     * @param batch     B
     * @param n         N
     * @param maxLength the longest document
     */
    public static Documents of(long seed, int batch, int n, int maxLength) {
        Random r = new Random(seed);
        int[][] ids = new int[batch][n];
        for (int b = 0; b < batch; b++) {
            int at = 0;
            int id = 0;
            while (at < n) {
                int len = Math.min(n - at, 1 + r.nextInt(maxLength));
                int value = r.nextInt(5) == 0 ? -1 : id++;
                Arrays.fill(ids[b], at, at + len, value);
                at += len;
            }
        }
        return Documents.of(ids);
    }
}
