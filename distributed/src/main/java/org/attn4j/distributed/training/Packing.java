package org.attn4j.distributed.training;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.ops.Documents;
import org.nd4j.linalg.dataset.api.DataSet;

/**
 * Document ids carried by a DataSet, so packed sequences reach {@link DistributedTrainer} through any
 * {@code DataSetIterator}: each example's ids (an {@code int[]} of its N positions, negative = padding) are its
 * example metadata, DL4J's per-example slot that iterators pass on with the DataSet.
 */
public final class Packing {

    private Packing() {
    }

    /**
     * {@code batch} with {@code documents} as its examples' metadata (replacing any); returns the same DataSet.
     *
     * @throws IllegalArgumentException if the documents do not cover the batch's examples and time steps
     */
    public static DataSet attach(DataSet batch, Documents documents) {
        long b = batch.getFeatures().size(0);
        long n = batch.getFeatures().size(batch.getFeatures().rank() - 1);
        documents.requireSize("Packing", b, n);
        List<java.io.Serializable> meta = new ArrayList<>();
        for (int i = 0; i < documents.batch(); i++) {
            meta.add(documents.ids(i));
        }
        batch.setExampleMetaData(meta);
        return batch;
    }

    /**
     * The documents {@link #attach} gave {@code batch}, or null when its examples carry no ids.
     *
     * @throws IllegalArgumentException if only some examples carry ids, or ids of another length than the steps
     */
    public static Documents of(DataSet batch) {
        List<?> meta = batch.getExampleMetaData();
        if (meta == null || meta.isEmpty() || meta.stream().noneMatch(m -> m instanceof int[])) {
            return null;
        }
        long b = batch.getFeatures().size(0);
        long n = batch.getFeatures().size(batch.getFeatures().rank() - 1);
        if (meta.size() != b || !meta.stream().allMatch(m -> m instanceof int[] ids && ids.length == n)) {
            throw new IllegalArgumentException("Packing: expected document ids (int[" + n + "]) as the metadata of "
                    + "each of the " + b + " examples, got " + meta.size() + " entries"
                    + (meta.isEmpty() ? "" : " of " + meta.get(0).getClass().getSimpleName()));
        }
        int[][] ids = new int[(int) b][];
        for (int i = 0; i < b; i++) {
            ids[i] = (int[]) meta.get(i);
        }
        return Documents.of(ids);
    }
}
