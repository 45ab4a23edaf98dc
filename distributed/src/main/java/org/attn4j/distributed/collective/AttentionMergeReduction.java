package org.attn4j.distributed.collective;

import org.attn4j.ops.flash.AttentionMerge;
import org.attn4j.ops.flash.AttentionOutput;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * The merge of partial attention results as a {@link Reduction}: a contribution is the pair
 * {@code (O [..., rows, D], LSE [..., rows])}, combined by {@link AttentionMerge#merge} (BurstAttention, GAO,
 * section 3.1). {@link #split} cuts both arrays along their rows (all dimensions but {@code O}'s last), so a row
 * of {@code O} stays with its {@code LSE}.
 */
final class AttentionMergeReduction implements Reduction {

    static final AttentionMergeReduction INSTANCE = new AttentionMergeReduction();

    private AttentionMergeReduction() {
    }

    @Override
    public String name() {
        return "attention merge";
    }

    @Override
    public INDArray[] combine(INDArray[] incoming, INDArray[] local) {
        checkPair(incoming, "received");
        checkPair(local, "local");
        AttentionOutput m = AttentionMerge.merge(new AttentionOutput(incoming[0], incoming[1]),
                new AttentionOutput(local[0], local[1]));
        incoming[0].close();
        incoming[1].close();
        return new INDArray[] {m.output(), m.lse()};
    }

    @Override
    public INDArray[][] split(INDArray[] value, int parts) {
        checkPair(value, "value");
        long rows = value[1].length();
        long d = value[0].length() / Math.max(rows, 1);
        INDArray o = value[0].reshape('c', new long[] {rows, d});
        INDArray lse = value[1].reshape('c', new long[] {rows});
        INDArray[][] out = new INDArray[parts][];
        for (int j = 0; j < parts; j++) {
            long from = Reduction.partStart(rows, parts, j);
            long to = Reduction.partStart(rows, parts, j + 1);
            out[j] = to == from
                    ? new INDArray[] {Nd4j.create(o.dataType(), 0, d), Nd4j.create(lse.dataType(), 0)}
                    : new INDArray[] {o.get(NDArrayIndex.interval(from, to), NDArrayIndex.all()),
                        lse.get(NDArrayIndex.interval(from, to))};
        }
        return out;
    }

    @Override
    public INDArray[] join(INDArray[][] parts, INDArray[] like) {
        long rows = like[1].length();
        long d = like[0].length() / Math.max(rows, 1);
        INDArray o = Nd4j.create(like[0].dataType(), rows, d);
        INDArray lse = Nd4j.create(like[1].dataType(), rows);
        for (int j = 0; j < parts.length; j++) {
            long from = Reduction.partStart(rows, parts.length, j);
            long to = Reduction.partStart(rows, parts.length, j + 1);
            if (to > from) {
                o.get(NDArrayIndex.interval(from, to), NDArrayIndex.all()).assign(parts[j][0]);
                lse.get(NDArrayIndex.interval(from, to)).assign(parts[j][1]);
            }
        }
        return new INDArray[] {o.reshape('c', like[0].shape()), lse.reshape('c', like[1].shape())};
    }

    private static void checkPair(INDArray[] pair, String what) {
        if (pair.length != 2) {
            throw new IllegalArgumentException("Reduction attention merge: the " + what + " contribution has "
                    + pair.length + " arrays; expected 2, (O, LSE)");
        }
    }

    @Override
    public String toString() {
        return name();
    }
}
