package org.attn4j.distributed.sequence;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** Several arrays of one type sent as one message: flattened and concatenated, split again by their shapes. */
final class Bundle {

    private Bundle() {
    }

    /** The arrays flattened (C order) into one vector, in order. */
    static INDArray pack(INDArray... parts) {
        INDArray[] flat = new INDArray[parts.length];
        for (int i = 0; i < parts.length; i++) {
            flat[i] = parts[i].dup('c').reshape(parts[i].length());
        }
        return Nd4j.concat(0, flat);
    }

    /** The inverse of {@link #pack}: views of {@code bundle} in the given shapes, in order. */
    static INDArray[] unpack(INDArray bundle, long[]... shapes) {
        INDArray[] out = new INDArray[shapes.length];
        long at = 0;
        for (int i = 0; i < shapes.length; i++) {
            long n = 1;
            for (long x : shapes[i]) {
                n *= x;
            }
            out[i] = bundle.get(NDArrayIndex.interval(at, at + n)).reshape('c', shapes[i]);
            at += n;
        }
        if (at != bundle.length()) {
            throw new IllegalStateException("bundle of " + bundle.length() + " elements unpacked as " + at);
        }
        return out;
    }
}
