package org.attn4j.distributed.sequence;

import org.attn4j.ops.Documents;

/**
 * How evenly a layout spreads the attention work of packed sequences over the workers: the work of a worker is
 * the number of score entries its queries compute, the (query, key) pairs in one document (and, causal, with the
 * key not after the query). One document per sequence makes zigzag even for causal masks; documents of random
 * lengths do not, and {@link SequenceLayout#STRIPED} is then the even one (every worker holds every P-th position
 * of every document).
 */
public final class DocumentBalance {

    private DocumentBalance() {
    }

    /**
     * The score entries each of {@code workers} workers computes, summed over the sequences of the batch.
     *
     * @param layout  which positions each worker holds
     * @param docs    the batch's documents
     * @param workers P
     * @param causal  causal masking
     */
    public static long[] work(SequenceLayout layout, Documents docs, int workers, boolean causal) {
        long[] work = new long[workers];
        for (int w = 0; w < workers; w++) {
            for (int i : layout.positions(w, workers, docs.length())) {
                for (int b = 0; b < docs.batch(); b++) {
                    work[w] += causal ? i - docs.start(b, i) + (docs.isPadding(b, i) ? 0 : 1)
                            : docs.end(b, i) - docs.start(b, i);
                }
            }
        }
        return work;
    }

    /** The largest deviation of one worker's work from the mean, as a fraction of the mean (0 = even). */
    public static double spread(long[] work) {
        double mean = 0;
        for (long x : work) {
            mean += x;
        }
        mean /= work.length;
        double worst = 0;
        for (long x : work) {
            worst = Math.max(worst, Math.abs(x - mean));
        }
        return mean == 0 ? 0 : worst / mean;
    }
}
