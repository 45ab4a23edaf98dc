package org.attn4j.ops.linear;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.ops.Documents;
import org.attn4j.ops.Views;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Non-causal linear attention, {@code S = kvIn + K^T V}, {@code O = Q S}, {@code kvOut = S}, by the
 * right product (LASP equation 3); backward with {@code G = Q^T dO + dKvOut}: {@code dQ = dO S^T},
 * {@code dK = V G^T}, {@code dV = K G} (summed over the query heads of a GQA group), {@code dKvIn = G}.
 *
 * <p>With documents each document is its own such product: its queries read only its own keys' state; the
 * incoming state joins the first document when that one continues from before the call, the outgoing state is
 * the last document's (zero when the call ends in padding); padding gives zero output and gradients.
 */
final class NonCausal {

    /** A run of positions {@code [from, to)} of one document (or of padding). */
    private record Run(int from, int to, boolean padding, boolean first, boolean last, boolean continues) {
    }

    private NonCausal() {
    }

    static void forward(AttentionShapes s, INDArray q, INDArray k, INDArray v, INDArray kvIn, INDArray out,
                        INDArray kvOut, Documents docs, int start) {
        int d = s.headDim();
        int n = s.queries();
        for (int b = 0; b < s.batch(); b++) {
            for (Run run : runs(docs, start, b, n)) {
                int len = run.to - run.from;
                for (int hk = 0; hk < s.kvHeads(); hk++) {
                    long kOff = (((long) b * s.kvHeads() + hk) * n + run.from) * d;
                    INDArray kv = run.padding ? null
                            : Views.matrix(k, kOff, len, d).transpose().mmul(Views.matrix(v, kOff, len, d));
                    for (int g = 0; g < s.group(); g++) {
                        int h = hk * s.group() + g;
                        long at = ((long) b * s.heads() + h) * d * d;
                        long qOff = (((long) b * s.heads() + h) * n + run.from) * d;
                        if (run.padding) {
                            Views.matrix(out, qOff, len, d).assign(0);
                            if (run.last) {
                                Views.matrix(kvOut, at, d, d).assign(0);
                            }
                            continue;
                        }
                        INDArray st = kv.dup();
                        if (kvIn != null && run.first && run.continues) {
                            st.addi(Views.matrix(kvIn, at, d, d));
                        }
                        if (run.last) {
                            Views.matrix(kvOut, at, d, d).assign(st);
                        }
                        Nd4j.gemm(Views.matrix(q, qOff, len, d), st, Views.matrix(out, qOff, len, d), false, false,
                                1.0, 0.0);
                    }
                }
            }
        }
    }

    static void backward(AttentionShapes s, INDArray q, INDArray k, INDArray v, INDArray kvIn, INDArray dOut,
                         INDArray dKvOut, INDArray dq, INDArray dk, INDArray dv, INDArray dKvIn, Documents docs,
                         int start) {
        int d = s.headDim();
        int n = s.queries();
        for (int b = 0; b < s.batch(); b++) {
            for (Run run : runs(docs, start, b, n)) {
                int len = run.to - run.from;
                for (int hk = 0; hk < s.kvHeads(); hk++) {
                    long kOff = (((long) b * s.kvHeads() + hk) * n + run.from) * d;
                    INDArray kt = Views.matrix(k, kOff, len, d);
                    INDArray vt = Views.matrix(v, kOff, len, d);
                    if (run.padding) {
                        kt = null;
                        Views.matrix(dk, kOff, len, d).assign(0);
                        Views.matrix(dv, kOff, len, d).assign(0);
                    }
                    INDArray kv = kt == null ? null : kt.transpose().mmul(vt);
                    INDArray gSum = Nd4j.create(s.dataType(), d, d);
                    for (int g = 0; g < s.group(); g++) {
                        int h = hk * s.group() + g;
                        long at = ((long) b * s.heads() + h) * d * d;
                        long qOff = (((long) b * s.heads() + h) * n + run.from) * d;
                        boolean joined = kvIn != null && run.first && run.continues;
                        if (run.first) {
                            Views.matrix(dKvIn, at, d, d).assign(0);
                        }
                        if (run.padding) {
                            Views.matrix(dq, qOff, len, d).assign(0);
                            continue;
                        }
                        INDArray st = joined ? kv.add(Views.matrix(kvIn, at, d, d)) : kv;
                        INDArray dOt = Views.matrix(dOut, qOff, len, d);
                        Nd4j.gemm(dOt, st, Views.matrix(dq, qOff, len, d), false, true, 1.0, 0.0);
                        INDArray grad = Nd4j.create(s.dataType(), d, d);
                        Nd4j.gemm(Views.matrix(q, qOff, len, d), dOt, grad, true, false, 1.0, 0.0);
                        if (dKvOut != null && run.last) {
                            grad.addi(Views.matrix(dKvOut, at, d, d));
                        }
                        if (run.first && run.continues) {
                            Views.matrix(dKvIn, at, d, d).assign(grad);
                        }
                        gSum.addi(grad);
                    }
                    if (!run.padding) {
                        Nd4j.gemm(vt, gSum, Views.matrix(dk, kOff, len, d), false, true, 1.0, 0.0);
                        Nd4j.gemm(kt, gSum, Views.matrix(dv, kOff, len, d), false, false, 1.0, 0.0);
                    }
                }
            }
        }
    }

    /** The runs of sequence b: one for the whole call without documents. */
    private static List<Run> runs(Documents docs, int start, int b, int n) {
        List<Run> runs = new ArrayList<>();
        if (docs == null) {
            runs.add(new Run(0, n, false, true, true, true));
            return runs;
        }
        int from = 0;
        for (int i = 1; i <= n; i++) {
            if (i == n || docs.id(b, start + i) != docs.id(b, start + from)) {
                int p = start + from;
                boolean continues = p == 0 || docs.continues(b, p);
                runs.add(new Run(from, i, docs.isPadding(b, p), from == 0, i == n, continues));
                from = i;
            }
        }
        return runs;
    }
}
