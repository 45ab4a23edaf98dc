package org.attn4j.distributed.collective;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * How a reduce-scatter or all-reduce combines the contributions of the members. A contribution is a tuple of
 * arrays ({@code INDArray[]}, the same length everywhere): one array for a sum, two for a partial attention
 * result {@code (O, LSE)} whose merge reads both. The operation must be associative and commutative: the ring
 * combines block {@code j} starting at member {@code j + 1} and ending at member {@code j}.
 *
 * <p>{@link #split} and {@link #join} cut a value into independently reducible parts for the all-reduce. The
 * defaults flatten each array and cut it into contiguous pieces, which is right for element-wise reductions
 * only; a reduction that mixes elements (the attention merge reads a row of {@code O} together with its
 * {@code LSE}) overrides both, e.g. cutting {@code O [B,H,N,D]} and {@code LSE [B,H,N]} along {@code N}.
 */
public interface Reduction {

    /** A short name for messages, e.g. "sum". */
    String name();

    /**
     * Combines two partial results.
     *
     * @param incoming the partial result of other members, received from the transport: owned by the
     *                 reduction, which may overwrite it and return it
     * @param local    this member's contribution: read only
     * @return {@code incoming (+) local}, arrays of the contribution's shapes and types
     * @throws IllegalArgumentException if the tuples do not match in length, shape or type
     */
    INDArray[] combine(INDArray[] incoming, INDArray[] local);

    /**
     * Cuts {@code value} into {@code parts} parts, each a tuple like {@code value}, that are reduced
     * independently; parts may be views of {@code value} and may be empty.
     */
    default INDArray[][] split(INDArray[] value, int parts) {
        INDArray[][] out = new INDArray[parts][value.length];
        for (int k = 0; k < value.length; k++) {
            INDArray flat = value[k].reshape(value[k].length());
            for (int j = 0; j < parts; j++) {
                long from = partStart(value[k].length(), parts, j);
                long to = partStart(value[k].length(), parts, j + 1);
                out[j][k] = to == from ? Nd4j.create(value[k].dataType(), 0)
                        : flat.get(NDArrayIndex.interval(from, to));
            }
        }
        return out;
    }

    /**
     * Puts reduced parts back together in the shapes of {@code like}; the inverse of {@link #split}.
     *
     * @return new arrays, owned by the caller
     */
    default INDArray[] join(INDArray[][] parts, INDArray[] like) {
        INDArray[] out = new INDArray[like.length];
        for (int k = 0; k < like.length; k++) {
            INDArray flat = Nd4j.create(like[k].dataType(), like[k].length());
            for (int j = 0; j < parts.length; j++) {
                long from = partStart(like[k].length(), parts.length, j);
                long to = partStart(like[k].length(), parts.length, j + 1);
                if (to > from) {
                    flat.get(NDArrayIndex.interval(from, to)).assign(parts[j][k]);
                }
            }
            out[k] = flat.reshape(like[k].shape());
        }
        return out;
    }

    /**
     * Where part {@code j} of {@code n} elements cut into {@code parts} starts: the first {@code n mod parts}
     * parts hold one element more than the others.
     */
    static long partStart(long n, int parts, int j) {
        long base = n / parts;
        long extra = n % parts;
        return j * base + Math.min(j, extra);
    }

    /** Element-wise sum of each array of the tuple. */
    static Reduction sum() {
        return SumReduction.INSTANCE;
    }

    /**
     * The merge of partial attention results {@code (O [..., rows, D], LSE [..., rows])} over disjoint key sets
     * (BurstAttention's GAO); splits along rows.
     */
    static Reduction attentionMerge() {
        return AttentionMergeReduction.INSTANCE;
    }
}
