package org.attn4j.ops.linear;

import org.attn4j.ops.Views;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Non-causal linear attention, {@code S = kvIn + K^T V}, {@code O = Q S}, {@code kvOut = S}, by the
 * right product (LASP equation 3); backward with {@code G = Q^T dO + dKvOut}: {@code dQ = dO S^T},
 * {@code dK = V G^T}, {@code dV = K G} (summed over the query heads of a GQA group), {@code dKvIn = G}.
 */
final class NonCausal {

    private NonCausal() {
    }

    static void forward(AttentionShapes s, INDArray q, INDArray k, INDArray v, INDArray kvIn, INDArray out,
                        INDArray kvOut) {
        int d = s.headDim();
        int n = s.queries();
        for (int b = 0; b < s.batch(); b++) {
            for (int hk = 0; hk < s.kvHeads(); hk++) {
                long kOff = ((long) b * s.kvHeads() + hk) * n * d;
                INDArray kv = Views.matrix(k, kOff, n, d).transpose().mmul(Views.matrix(v, kOff, n, d));
                for (int g = 0; g < s.group(); g++) {
                    int h = hk * s.group() + g;
                    long at = ((long) b * s.heads() + h) * d * d;
                    INDArray st = Views.matrix(kvOut, at, d, d).assign(kv);
                    if (kvIn != null) {
                        st.addi(Views.matrix(kvIn, at, d, d));
                    }
                    long qOff = ((long) b * s.heads() + h) * n * d;
                    Nd4j.gemm(Views.matrix(q, qOff, n, d), st, Views.matrix(out, qOff, n, d), false, false, 1.0, 0.0);
                }
            }
        }
    }

    static void backward(AttentionShapes s, INDArray q, INDArray k, INDArray v, INDArray kvIn, INDArray dOut,
                         INDArray dKvOut, INDArray dq, INDArray dk, INDArray dv, INDArray dKvIn) {
        int d = s.headDim();
        int n = s.queries();
        for (int b = 0; b < s.batch(); b++) {
            for (int hk = 0; hk < s.kvHeads(); hk++) {
                long kOff = ((long) b * s.kvHeads() + hk) * n * d;
                INDArray kt = Views.matrix(k, kOff, n, d);
                INDArray vt = Views.matrix(v, kOff, n, d);
                INDArray kv = kt.transpose().mmul(vt);
                INDArray gSum = Nd4j.create(s.dataType(), d, d);
                for (int g = 0; g < s.group(); g++) {
                    int h = hk * s.group() + g;
                    long at = ((long) b * s.heads() + h) * d * d;
                    long qOff = ((long) b * s.heads() + h) * n * d;
                    INDArray st = kvIn == null ? kv : kv.add(Views.matrix(kvIn, at, d, d));
                    INDArray dOt = Views.matrix(dOut, qOff, n, d);
                    Nd4j.gemm(dOt, st, Views.matrix(dq, qOff, n, d), false, true, 1.0, 0.0);
                    INDArray grad = Views.matrix(dKvIn, at, d, d);
                    Nd4j.gemm(Views.matrix(q, qOff, n, d), dOt, grad, true, false, 1.0, 0.0);
                    if (dKvOut != null) {
                        grad.addi(Views.matrix(dKvOut, at, d, d));
                    }
                    gSum.addi(grad);
                }
                Nd4j.gemm(vt, gSum, Views.matrix(dk, kOff, n, d), false, true, 1.0, 0.0);
                Nd4j.gemm(kt, gSum, Views.matrix(dv, kOff, n, d), false, false, 1.0, 0.0);
            }
        }
    }
}
