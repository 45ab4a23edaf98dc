package org.attn4j.distributed.transport;

import org.nd4j.linalg.api.ndarray.INDArray;

/** Whether an array's elements lie back to back in memory, so the transport can read or write them in place. */
public final class Contiguity {

    private Contiguity() {
    }

    /**
     * Whether the elements lie back to back in C order: each dimension's stride is the product of the later
     * dimensions' sizes (dimensions of size 1 may have any stride). Decided from shape and strides alone: ND4J's
     * own checks refuse some such views (an interval of a vector, for one), whose copy costs more than sending it.
     */
    public static boolean isCContiguous(INDArray array) {
        long[] shape = array.shape();
        long[] stride = array.stride();
        long expected = 1;
        for (int d = shape.length - 1; d >= 0; d--) {
            if (shape[d] != 1 && stride[d] != expected) {
                return false;
            }
            expected *= shape[d];
        }
        return true;
    }
}
