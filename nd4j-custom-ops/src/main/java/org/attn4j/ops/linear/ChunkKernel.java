package org.attn4j.ops.linear;

import java.util.Arrays;

import org.attn4j.ops.Flat;
import org.attn4j.ops.Gemm;
import org.attn4j.ops.Scratch;
import org.attn4j.ops.Views;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The chunked causal kernels of {@link LinearAttention}, one instance per worker thread (it owns its
 * scratch buffers). Each phase works on one chunk, or one (batch, head) for the scans; see
 * {@link LinearAttention} for the formulas. Products are BLAS gemms on blocks of the flat buffers
 * ({@link Gemm}: no ND4J view per chunk); the element-wise work (decay
 * mask, row weights, the scans over the {@code D x D} states) runs in Java on the flat buffers
 * ({@link Flat}). Arrays are C-ordered and offset-free.
 */
final class ChunkKernel {

    private final AttentionShapes s;
    private final ChunkPlan plan;
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
        long kOff = plan.kOffset(b, h / s.group(), t);
        long qOff = plan.qOffset(b, h, t);
        if (plan.padding(b, t)) {
            zero(out, qOff, c, d);
            zero(states, plan.stateOffset(b, h, t), d, d);
            return;
        }
        INDArray a = buffer(0, c, c);
        Gemm.mul(q, qOff, false, k, kOff, true, a, 0, c, c, d, 1.0, 0.0);
        Flat.of(a).multiply(tab.mask, c * c);
        Gemm.mul(a, 0, false, v, kOff, false, out, qOff, c, d, c, 1.0, 0.0);
        INDArray kd = buffer(1, c, d);
        Flat.of(kd).scaledRows(Flat.of(k), kOff, tab.out, c, d);
        Gemm.mul(kd, 0, true, v, kOff, false, states, plan.stateOffset(b, h, t), d, d, c, 1.0, 0.0);
    }

    /**
     * Forward phase 2 for (b, h): turns the chunks' own states into the states entering each chunk
     * ({@code S_t = lambda^c S_(t-1) + own_t}, algorithm 2 line 16) and writes the final state.
     */
    void forwardScan(INDArray states, INDArray kvIn, INDArray kvOut, int b, int h) {
        scan(states, kvIn, kvOut, b, h, false);
    }

    /** Forward phase 3, chunk t of (b, h): {@code O_t += Lambda Q_t S_(t-1)} (algorithm 2 line 14). */
    void forwardInter(INDArray q, INDArray out, INDArray states, int b, int h, int t) {
        if (plan.fresh(b, t)) {
            return;                                     // the state entering it is zero
        }
        int c = plan.length(t);
        int d = s.headDim();
        long qOff = plan.qOffset(b, h, t);
        INDArray qa = buffer(1, c, d);
        Flat.of(qa).scaledRows(Flat.of(q), qOff, plan.tables(h, c).in, c, d);
        Gemm.mul(qa, 0, false, states, plan.stateOffset(b, h, t), false, out, qOff, c, d, d, 1.0, 1.0);
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
        if (plan.padding(b, t)) {
            zero(dk, kOff, c, d);
            zero(dv, kOff, c, d);
            for (int g = 0; g < s.group(); g++) {
                int h = hk * s.group() + g;
                zero(dq, plan.qOffset(b, h, t), c, d);
                zero(dStates, plan.stateOffset(b, h, t), d, d);
            }
            return;
        }
        for (int g = 0; g < s.group(); g++) {
            int h = hk * s.group() + g;
            ChunkTables tab = plan.tables(h, c);
            long qOff = plan.qOffset(b, h, t);
            long stOff = plan.stateOffset(b, h, t);
            INDArray dp = buffer(0, c, c);
            Gemm.mul(dOut, qOff, false, v, kOff, true, dp, 0, c, c, d, 1.0, 0.0);
            INDArray a = buffer(4, c, c);
            Gemm.mul(q, qOff, false, k, kOff, true, a, 0, c, c, d, 1.0, 0.0);
            if (dDecay != null) {
                dDecay[h] += decayIntra(tab, q, dOut, qOff, a, dp, states, stOff, c);
            }
            Flat.of(dp).multiply(tab.mask, c * c);
            Gemm.mul(dp, 0, false, k, kOff, false, dq, qOff, c, d, c, 1.0, 0.0);
            double first = g == 0 ? 0.0 : 1.0;       // dK, dV start uninitialised: the group's first head writes
            Gemm.mul(dp, 0, true, q, qOff, false, dk, kOff, c, d, c, 1.0, first);
            Flat.of(a).multiply(tab.mask, c * c);
            Gemm.mul(a, 0, true, dOut, qOff, false, dv, kOff, c, d, c, 1.0, first);
            INDArray doa = buffer(1, c, d);
            Flat.of(doa).scaledRows(Flat.of(dOut), qOff, tab.in, c, d);
            Gemm.mul(doa, 0, false, states, stOff, true, dq, qOff, c, d, d, 1.0, 1.0);
            INDArray qa = buffer(5, c, d);
            Flat.of(qa).scaledRows(Flat.of(q), qOff, tab.in, c, d);
            Gemm.mul(qa, 0, true, dOut, qOff, false, dStates, stOff, d, d, c, 1.0, 0.0);
        }
    }

    /**
     * Backward phase 2 for (b, h), last chunk first: turns each chunk's own state gradient into the
     * gradient of the state leaving it ({@code H_(t-1) = lambda^c H_t + own_t}, algorithm 3 line 18) and
     * writes the gradient of the incoming state.
     */
    void backwardScan(INDArray dStates, INDArray dKvOut, INDArray dKvIn, int b, int h) {
        scan(dStates, dKvOut, dKvIn, b, h, true);
    }

    /** Backward phase 3, chunk t of (b, hk): dK and dV's inter parts from the leaving-state gradients. */
    void backwardInter(INDArray k, INDArray v, INDArray states, INDArray dStates, INDArray dk, INDArray dv, int b,
                       int hk, int t) {
        if (plan.padding(b, t)) {
            return;                                     // its keys add nothing to any state
        }
        int c = plan.length(t);
        int d = s.headDim();
        long kOff = plan.kOffset(b, hk, t);
        for (int g = 0; g < s.group(); g++) {
            int h = hk * s.group() + g;
            ChunkTables tab = plan.tables(h, c);
            long stOff = plan.stateOffset(b, h, t);
            INDArray vb = buffer(1, c, d);
            Flat.of(vb).scaledRows(Flat.of(v), kOff, tab.out, c, d);
            Gemm.mul(vb, 0, false, dStates, stOff, true, dk, kOff, c, d, d, 1.0, 1.0);
            INDArray kb = buffer(5, c, d);
            Flat.of(kb).scaledRows(Flat.of(k), kOff, tab.out, c, d);
            Gemm.mul(kb, 0, false, dStates, stOff, false, dv, kOff, c, d, d, 1.0, 1.0);
            if (dDecay != null) {
                dDecay[h] += decayInter(tab, k, v, kOff, dStates, states, stOff, c);
            }
        }
    }

    /**
     * The sequential pass over one (b, h)'s chunk states, in Java on the flat buffers: forward turns each
     * chunk's own state into the state entering it, backward (last chunk first) each own state gradient into
     * the gradient of the state leaving it. {@code first} (null = 0) starts the running state, {@code last}
     * receives its end.
     */
    private void scan(INDArray states, INDArray first, INDArray last, int b, int h, boolean backward) {
        int d2 = s.headDim() * s.headDim();
        long at = ((long) b * s.heads() + h) * d2;
        double[] run = new double[d2];
        if (first != null) {
            Flat f = Flat.of(first);
            for (int i = 0; i < d2; i++) {
                run[i] = f.get(at + i);
            }
        }
        Flat st = Flat.of(states);
        for (int step = 0; step < plan.chunks; step++) {
            int t = backward ? plan.chunks - 1 - step : step;
            double w = plan.tables(h, plan.length(t)).whole;
            long base = plan.stateOffset(b, h, t);
            boolean fresh = plan.fresh(b, t);
            if (fresh && !backward) {
                Arrays.fill(run, 0.0);                  // a document starts here: no state enters it
            }
            for (int i = 0; i < d2; i++) {
                double own = st.get(base + i);
                st.set(base + i, run[i]);
                run[i] = fresh && backward ? 0.0 : run[i] * w + own;
            }
        }
        Flat l = Flat.of(last);
        for (int i = 0; i < d2; i++) {
            l.set(at + i, run[i]);
        }
    }

    /*
     * dL/dlambda = sum_s <G_s, kv_(s-1)>, G_s = dL/dkv_s, since kv_s = lambda kv_(s-1) + k_s v_s^T. Split
     * over a chunk with entering state S and leaving-state gradient H, the sum has four parts:
     *   (a) sum_i (i+1) lambda^i q_i^T S do_i             (b) sum_(i>j) (i-j) lambda^(i-j-1) (q_i.k_j)(do_i.v_j)
     *   (c) c lambda^(c-1) <H, S>                          (d) sum_j (c-1-j) lambda^(c-2-j) k_j^T H v_j
     * (a) and (b) come from the intra pass, (c) and (d) from the inter pass.
     */
    private double decayIntra(ChunkTables tab, INDArray q, INDArray dOut, long qOff, INDArray scores, INDArray dp,
                              INDArray states, long stOff, int c) {
        Flat a = Flat.of(scores);
        Flat p = Flat.of(dp);
        double partB = 0;
        for (int i = 0; i < c * c; i++) {
            partB += a.get(i) * p.get(i) * tab.maskSlope[i];
        }
        INDArray qs = buffer(6, c, s.headDim());
        Gemm.mul(q, qOff, false, states, stOff, false, qs, 0, c, s.headDim(), s.headDim(), 1.0, 0.0);
        return partB + Flat.of(qs).weightedRowDots(Flat.of(dOut), qOff, tab.inSlope, c, s.headDim());
    }

    private double decayInter(ChunkTables tab, INDArray k, INDArray v, long kOff, INDArray dStates,
                              INDArray states, long at, int c) {
        int d2 = s.headDim() * s.headDim();
        Flat hs = Flat.of(dStates);
        Flat st = Flat.of(states);
        double partC = 0;
        for (int i = 0; i < d2; i++) {
            partC += hs.get(at + i) * st.get(at + i);
        }
        INDArray kh = buffer(6, c, s.headDim());
        Gemm.mul(k, kOff, false, dStates, at, false, kh, 0, c, s.headDim(), s.headDim(), 1.0, 0.0);
        return tab.wholeSlope * partC + Flat.of(kh).weightedRowDots(Flat.of(v), kOff, tab.outSlope, c, s.headDim());
    }

    private static void zero(INDArray a, long offset, int rows, int cols) {
        Views.matrix(a, offset, rows, cols).assign(0);
    }

    private INDArray buffer(int slot, int rows, int cols) {
        return Scratch.matrix(slot, s.dataType(), rows, cols);
    }
}
