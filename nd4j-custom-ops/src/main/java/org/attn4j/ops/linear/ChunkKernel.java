package org.attn4j.ops.linear;

import java.util.HashMap;
import java.util.Map;

import org.attn4j.ops.Views;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The chunked causal kernels of {@link LinearAttention}, one instance per worker thread (it owns its
 * scratch buffers). Each phase works on one chunk, or one (batch, head) for the scans; see
 * {@link LinearAttention} for the formulas. Arrays are C-ordered and offset-free.
 */
final class ChunkKernel {

    private final AttentionShapes s;
    private final ChunkPlan plan;
    private final Map<Long, INDArray> buffers = new HashMap<>();
    /** This thread's share of dL/dlambda per query head, when asked for. */
    final double[] dDecay;

    ChunkKernel(AttentionShapes s, ChunkPlan plan, boolean decayGradient) {
        this.s = s;
        this.plan = plan;
        this.dDecay = decayGradient ? new double[s.heads()] : null;
    }

    /** Forward phase 1, chunk t of (b, h): {@code O_t = [(Q K^T) . M] V} and the chunk's own state. */
    void forwardIntra(INDArray q, INDArray k, INDArray v, INDArray out, INDArray states, int b, int h, int t) {
        int c = plan.length(t);
        int d = s.headDim();
        ChunkTables tab = plan.tables(h, c);
        INDArray qt = Views.matrix(q, plan.qOffset(b, h, t), c, d);
        INDArray kt = Views.matrix(k, plan.kOffset(b, h / s.group(), t), c, d);
        INDArray vt = Views.matrix(v, plan.kOffset(b, h / s.group(), t), c, d);
        INDArray a = buffer(0, c, c);
        Nd4j.gemm(qt, kt, a, false, true, 1.0, 0.0);
        a.muli(tab.mask);
        Nd4j.gemm(a, vt, Views.matrix(out, plan.qOffset(b, h, t), c, d), false, false, 1.0, 0.0);
        INDArray kd = buffer(1, c, d).assign(kt).muliColumnVector(tab.out);
        Nd4j.gemm(kd, vt, plan.state(states, b, h, t), true, false, 1.0, 0.0);
    }

    /**
     * Forward phase 2 for (b, h): turns the chunks' own states into the states entering each chunk
     * ({@code S_t = lambda^c S_(t-1) + own_t}, algorithm 2 line 16) and returns the final state.
     */
    void forwardScan(INDArray states, INDArray kvIn, INDArray kvOut, int b, int h) {
        int d = s.headDim();
        long at = ((long) b * s.heads() + h) * d * d;
        INDArray run = buffer(2, d, d);
        INDArray own = buffer(3, d, d);
        if (kvIn == null) {
            run.assign(0);
        } else {
            run.assign(Views.matrix(kvIn, at, d, d));
        }
        for (int t = 0; t < plan.chunks; t++) {
            INDArray st = plan.state(states, b, h, t);
            own.assign(st);
            st.assign(run);
            run.muli(plan.tables(h, plan.length(t)).whole).addi(own);
        }
        Views.matrix(kvOut, at, d, d).assign(run);
    }

    /** Forward phase 3, chunk t of (b, h): {@code O_t += Lambda Q_t S_(t-1)} (algorithm 2 line 14). */
    void forwardInter(INDArray q, INDArray out, INDArray states, int b, int h, int t) {
        int c = plan.length(t);
        int d = s.headDim();
        INDArray qa = buffer(1, c, d).assign(Views.matrix(q, plan.qOffset(b, h, t), c, d))
                .muliColumnVector(plan.tables(h, c).in);
        Nd4j.gemm(qa, plan.state(states, b, h, t), Views.matrix(out, plan.qOffset(b, h, t), c, d),
                false, false, 1.0, 1.0);
    }

    /**
     * Backward phase 1, chunk t of kv head (b, hk), over the query heads of its group: the intra-chunk
     * gradients, dQ's inter part from the cached entering state, and each head's own state gradient
     * {@code (Lambda Q_t)^T dO_t} (algorithm 3).
     */
    void backwardIntra(INDArray q, INDArray k, INDArray v, INDArray dOut, INDArray states, INDArray dStates,
                       INDArray dq, INDArray dk, INDArray dv, int b, int hk, int t) {
        int c = plan.length(t);
        int d = s.headDim();
        long kOff = plan.kOffset(b, hk, t);
        INDArray kt = Views.matrix(k, kOff, c, d);
        INDArray vt = Views.matrix(v, kOff, c, d);
        INDArray dkt = Views.matrix(dk, kOff, c, d);
        INDArray dvt = Views.matrix(dv, kOff, c, d);
        for (int g = 0; g < s.group(); g++) {
            int h = hk * s.group() + g;
            ChunkTables tab = plan.tables(h, c);
            long qOff = plan.qOffset(b, h, t);
            INDArray qt = Views.matrix(q, qOff, c, d);
            INDArray dot = Views.matrix(dOut, qOff, c, d);
            INDArray dqt = Views.matrix(dq, qOff, c, d);
            INDArray dp = buffer(0, c, c);
            Nd4j.gemm(dot, vt, dp, false, true, 1.0, 0.0);
            INDArray a = buffer(4, c, c);
            Nd4j.gemm(qt, kt, a, false, true, 1.0, 0.0);
            if (dDecay != null) {
                dDecay[h] += decayIntra(tab, qt, dot, a, dp, plan.state(states, b, h, t), c);
            }
            dp.muli(tab.mask);
            Nd4j.gemm(dp, kt, dqt, false, false, 1.0, 0.0);
            Nd4j.gemm(dp, qt, dkt, true, false, 1.0, 1.0);
            a.muli(tab.mask);
            Nd4j.gemm(a, dot, dvt, true, false, 1.0, 1.0);
            INDArray doa = buffer(1, c, d).assign(dot).muliColumnVector(tab.in);
            Nd4j.gemm(doa, plan.state(states, b, h, t), dqt, false, true, 1.0, 1.0);
            INDArray qa = buffer(5, c, d).assign(qt).muliColumnVector(tab.in);
            Nd4j.gemm(qa, dot, plan.state(dStates, b, h, t), true, false, 1.0, 0.0);
        }
    }

    /**
     * Backward phase 2 for (b, h), last chunk first: turns each chunk's own state gradient into the
     * gradient of the state leaving it ({@code H_(t-1) = lambda^c H_t + own_t}, algorithm 3 line 18) and
     * returns the gradient of the incoming state.
     */
    void backwardScan(INDArray dStates, INDArray dKvOut, INDArray dKvIn, int b, int h) {
        int d = s.headDim();
        long at = ((long) b * s.heads() + h) * d * d;
        INDArray run = buffer(2, d, d);
        INDArray own = buffer(3, d, d);
        if (dKvOut == null) {
            run.assign(0);
        } else {
            run.assign(Views.matrix(dKvOut, at, d, d));
        }
        for (int t = plan.chunks - 1; t >= 0; t--) {
            INDArray st = plan.state(dStates, b, h, t);
            own.assign(st);
            st.assign(run);
            run.muli(plan.tables(h, plan.length(t)).whole).addi(own);
        }
        Views.matrix(dKvIn, at, d, d).assign(run);
    }

    /** Backward phase 3, chunk t of (b, hk): dK and dV's inter parts from the leaving-state gradients. */
    void backwardInter(INDArray k, INDArray v, INDArray states, INDArray dStates, INDArray dk, INDArray dv, int b,
                       int hk, int t) {
        int c = plan.length(t);
        int d = s.headDim();
        long kOff = plan.kOffset(b, hk, t);
        INDArray kt = Views.matrix(k, kOff, c, d);
        INDArray vt = Views.matrix(v, kOff, c, d);
        for (int g = 0; g < s.group(); g++) {
            int h = hk * s.group() + g;
            ChunkTables tab = plan.tables(h, c);
            INDArray leaving = plan.state(dStates, b, h, t);
            INDArray vb = buffer(1, c, d).assign(vt).muliColumnVector(tab.out);
            Nd4j.gemm(vb, leaving, Views.matrix(dk, kOff, c, d), false, true, 1.0, 1.0);
            INDArray kb = buffer(5, c, d).assign(kt).muliColumnVector(tab.out);
            Nd4j.gemm(kb, leaving, Views.matrix(dv, kOff, c, d), false, false, 1.0, 1.0);
            if (dDecay != null) {
                dDecay[h] += decayInter(tab, kt, vt, leaving, plan.state(states, b, h, t), c);
            }
        }
    }

    /*
     * dL/dlambda = sum_s <G_s, kv_(s-1)>, G_s = dL/dkv_s, since kv_s = lambda kv_(s-1) + k_s v_s^T. Split
     * over a chunk with entering state S and leaving-state gradient H, the sum has four parts:
     *   (a) sum_i (i+1) lambda^i q_i^T S do_i             (b) sum_(i>j) (i-j) lambda^(i-j-1) (q_i.k_j)(do_i.v_j)
     *   (c) c lambda^(c-1) <H, S>                          (d) sum_j (c-1-j) lambda^(c-2-j) k_j^T H v_j
     * (a) and (b) come from the intra pass, (c) and (d) from the inter pass.
     */
    private double decayIntra(ChunkTables tab, INDArray qt, INDArray dot, INDArray scores, INDArray dp,
                              INDArray entering, int c) {
        double b = scores.mul(dp).muli(tab.maskSlope).sumNumber().doubleValue();
        double[] x = qt.mmul(entering).muli(dot).sum(1).castTo(org.nd4j.linalg.api.buffer.DataType.DOUBLE)
                .toDoubleVector();
        double a = 0;
        for (int i = 0; i < c; i++) {
            a += tab.inSlope[i] * x[i];
        }
        return a + b;
    }

    private double decayInter(ChunkTables tab, INDArray kt, INDArray vt, INDArray leaving, INDArray entering,
                              int c) {
        double cTerm = tab.wholeSlope * leaving.mul(entering).sumNumber().doubleValue();
        double[] y = kt.mmul(leaving).muli(vt).sum(1).castTo(org.nd4j.linalg.api.buffer.DataType.DOUBLE)
                .toDoubleVector();
        double dTerm = 0;
        for (int j = 0; j < c; j++) {
            dTerm += tab.outSlope[j] * y[j];
        }
        return cTerm + dTerm;
    }

    private INDArray buffer(int slot, int rows, int cols) {
        long key = ((long) slot << 58) | ((long) rows << 29) | cols;
        return buffers.computeIfAbsent(key, x -> Nd4j.create(s.dataType(), rows, cols));
    }
}
