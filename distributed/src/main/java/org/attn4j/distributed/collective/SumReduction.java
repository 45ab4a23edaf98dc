package org.attn4j.distributed.collective;

import java.util.Arrays;

import org.nd4j.linalg.api.ndarray.INDArray;

/** Element-wise sum, accumulated into the received array. */
final class SumReduction implements Reduction {
    static final SumReduction INSTANCE = new SumReduction();

    private SumReduction() {
    }

    @Override
    public String name() {
        return "sum";
    }

    @Override
    public INDArray[] combine(INDArray[] incoming, INDArray[] local) {
        if (incoming.length != local.length) {
            throw new IllegalArgumentException("Reduction sum: received " + incoming.length
                    + " arrays, this member contributes " + local.length);
        }
        for (int k = 0; k < local.length; k++) {
            if (!Arrays.equals(incoming[k].shape(), local[k].shape())
                    || incoming[k].dataType() != local[k].dataType()) {
                throw new IllegalArgumentException("Reduction sum: array " + k + " received as "
                        + incoming[k].dataType() + " " + Arrays.toString(incoming[k].shape())
                        + ", this member has " + local[k].dataType() + " " + Arrays.toString(local[k].shape()));
            }
            if (local[k].length() > 0) {
                incoming[k].addi(local[k]);
            }
        }
        return incoming;
    }

    @Override
    public String toString() {
        return name();
    }
}
