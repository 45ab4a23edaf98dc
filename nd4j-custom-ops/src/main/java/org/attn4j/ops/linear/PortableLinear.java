package org.attn4j.ops.linear;

import java.util.HashMap;
import java.util.Map;

import org.attn4j.ops.BlockScope;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * The chunked causal pass of {@link LinearAttention} made only of ND4J operations, which every backend runs on its
 * own device: per chunk, batched products over all (batch, head) pairs, the decay tables as arrays, and the
 * scans over the {@code D x D} states as array operations. The same formulas as the CPU kernel
 * ({@code ChunkKernel}, see {@link LinearAttention}), chunk by chunk in order; the same states kept for the
 * backward pass, so a cache of either serves both. Documents: a chunk that starts one (or is padding) multiplies
 * the entering state by 0, a padding chunk its output and its keys' contribution.
 *
 * <p>GQA: keys and values are repeated to the query heads once per call ({@code [B, H, N, D]}, the size of q), and
 * their gradients summed back over each group.
 */
final class PortableLinear {

    private final AttentionShapes s;
    private final ChunkPlan plan;
    private final int[] starts;
    private final DataType type;
    /** Per chunk: {@code [B, 1, 1, 1]}, 0 where the chunk starts from a zero state, else 1. */
    private final INDArray[] keep;
    /** Per chunk: {@code [B, 1, 1, 1]}, 0 where the chunk is padding, else 1. */
    private final INDArray[] real;
    private final Map<Integer, Tables> tables = new HashMap<>();

    /** The decay tables of one chunk length for every head, shaped to broadcast against {@code [B, H, c, x]}. */
    private record Tables(INDArray mask, INDArray in, INDArray out, INDArray whole, INDArray maskSlope,
                          INDArray inSlope, INDArray outSlope, INDArray wholeSlope) {
    }

    PortableLinear(AttentionShapes s, ChunkPlan plan) {
        this.s = s;
        this.plan = plan;
        this.starts = plan.starts();
        this.type = s.dataType();
        this.keep = new INDArray[plan.chunks];
        this.real = new INDArray[plan.chunks];
        for (int t = 0; t < plan.chunks; t++) {
            double[] k = new double[s.batch()];
            double[] r = new double[s.batch()];
            for (int b = 0; b < s.batch(); b++) {
                k[b] = plan.fresh(b, t) ? 0 : 1;
                r[b] = plan.padding(b, t) ? 0 : 1;
            }
            keep[t] = Nd4j.createFromArray(k).castTo(type).reshape(s.batch(), 1, 1, 1);
            real[t] = Nd4j.createFromArray(r).castTo(type).reshape(s.batch(), 1, 1, 1);
        }
    }

    /** Built outside the chunks' workspace: they live for the whole call. */
    private Tables tables(int c) {
        Tables built = tables.get(c);
        if (built == null) {
            try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
                built = build(c);
            }
            tables.put(c, built);
        }
        return built;
    }

    private Tables build(int c) {
        int h = s.heads();
        double[] mask = new double[h * c * c];
        double[] maskSlope = new double[h * c * c];
        double[] in = new double[h * c];
        double[] out = new double[h * c];
        double[] inSlope = new double[h * c];
        double[] outSlope = new double[h * c];
        double[] whole = new double[h];
        double[] wholeSlope = new double[h];
        for (int i = 0; i < h; i++) {
            ChunkTables t = plan.tables(i, c);
            System.arraycopy(t.mask, 0, mask, i * c * c, c * c);
            System.arraycopy(t.maskSlope, 0, maskSlope, i * c * c, c * c);
            System.arraycopy(t.in, 0, in, i * c, c);
            System.arraycopy(t.out, 0, out, i * c, c);
            System.arraycopy(t.inSlope, 0, inSlope, i * c, c);
            System.arraycopy(t.outSlope, 0, outSlope, i * c, c);
            whole[i] = t.whole;
            wholeSlope[i] = t.wholeSlope;
        }
        return new Tables(array(mask, 1, h, c, c), array(in, 1, h, c, 1), array(out, 1, h, c, 1),
                array(whole, 1, h, 1, 1), array(maskSlope, 1, h, c, c), array(inSlope, 1, h, c, 1),
                array(outSlope, 1, h, c, 1), array(wholeSlope, 1, h, 1, 1));
    }

    private INDArray array(double[] values, long... shape) {
        return Nd4j.createFromArray(values).castTo(type).reshape('c', shape);
    }

    /** Output, final state and the states entering each chunk ({@code [B, H, T, D, D]}). */
    LinearAttentionOutput forward(INDArray q, INDArray k, INDArray v, INDArray kvIn) {
        int d = s.headDim();
        INDArray kh = perQueryHead(k);
        INDArray vh = perQueryHead(v);
        INDArray out = Nd4j.create(type, q.shape());
        INDArray states = Nd4j.create(type, s.batch(), s.heads(), plan.chunks, d, d);
        INDArray run = kvIn == null ? Nd4j.zeros(type, s.batch(), s.heads(), d, d) : kvIn.dup();
        for (int t = 0; t < plan.chunks; t++) {
            Tables tab = tables(plan.length(t));
            try (MemoryWorkspace ws = BlockScope.enter("attn4j-portable-chunks")) {
                INDArray qt = chunk(q, t);
                INDArray kt = chunk(kh, t);
                INDArray vt = chunk(vh, t);
                run.muli(keep[t]);
                state(states, t).assign(run);
                INDArray a = Nd4j.matmul(qt, kt, false, true, false).muli(tab.mask());
                INDArray o = Nd4j.matmul(a, vt).addi(Nd4j.matmul(qt.mul(tab.in()), run)).muli(real[t]);
                chunk(out, t).assign(o);
                INDArray own = Nd4j.matmul(kt.mul(tab.out()), vt, true, false, false).muli(real[t]);
                run.muli(tab.whole()).addi(own);
            }
        }
        return new LinearAttentionOutput(out, run, new LinearAttentionCache(states, plan.chunk, plan.starts()));
    }

    /**
     * Gradients of q, k, v and the incoming state (and per query head of lambda when {@code decayGradient}), given
     * the states entering each chunk.
     */
    LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, INDArray dOut, INDArray dKvOut,
                                      INDArray states, boolean decayGradient) {
        int d = s.headDim();
        INDArray kh = perQueryHead(k);
        INDArray vh = perQueryHead(v);
        INDArray dq = Nd4j.create(type, q.shape());
        INDArray dkh = Nd4j.create(type, q.shape());
        INDArray dvh = Nd4j.create(type, q.shape());
        INDArray dDecay = decayGradient ? Nd4j.zeros(type, s.heads()) : null;
        INDArray run = dKvOut == null ? Nd4j.zeros(type, s.batch(), s.heads(), d, d) : dKvOut.dup();
        for (int t = plan.chunks - 1; t >= 0; t--) {
            Tables tab = tables(plan.length(t));
            try (MemoryWorkspace ws = BlockScope.enter("attn4j-portable-chunks")) {
                INDArray qt = chunk(q, t);
                INDArray kt = chunk(kh, t);
                INDArray vt = chunk(vh, t);
                INDArray dot = chunk(dOut, t);
                INDArray entering = state(states, t);
                INDArray leaving = run;                               // H_t, the gradient of the state leaving t
                INDArray a = Nd4j.matmul(qt, kt, false, true, false);
                INDArray dp = Nd4j.matmul(dot, vt, false, true, false);
                if (decayGradient) {
                    // The four parts of dL/dlambda (ChunkKernel): (b) and (a) from the chunk, (c) and (d) from H_t.
                    INDArray partB = a.mul(dp).muli(tab.maskSlope());
                    INDArray partA = Nd4j.matmul(qt, entering).muli(dot).sum(true, 3).muli(tab.inSlope());
                    INDArray partC = leaving.mul(entering).sum(true, 2, 3).muli(tab.wholeSlope());
                    INDArray partD = Nd4j.matmul(kt, leaving).muli(vt).sum(true, 3).muli(tab.outSlope());
                    dDecay.addi(partB.muli(real[t]).sum(0, 2, 3).addi(partA.muli(real[t]).sum(0, 2, 3))
                            .addi(partC.muli(real[t]).sum(0, 2, 3)).addi(partD.muli(real[t]).sum(0, 2, 3)));
                }
                dp.muli(tab.mask());
                a.muli(tab.mask());
                INDArray dqt = Nd4j.matmul(dp, kt)
                        .addi(Nd4j.matmul(dot.mul(tab.in()), entering, false, true, false));
                INDArray dkt = Nd4j.matmul(dp, qt, true, false, false)
                        .addi(Nd4j.matmul(vt.mul(tab.out()), leaving, false, true, false));
                INDArray dvt = Nd4j.matmul(a, dot, true, false, false)
                        .addi(Nd4j.matmul(kt.mul(tab.out()), leaving));
                chunk(dq, t).assign(dqt.muli(real[t]));
                chunk(dkh, t).assign(dkt.muli(real[t]));
                chunk(dvh, t).assign(dvt.muli(real[t]));
                INDArray own = Nd4j.matmul(qt.mul(tab.in()), dot, true, false, false).muli(real[t]);
                run.muli(tab.whole()).addi(own).muli(keep[t]);     // in place: the state outlives the chunk
            }
        }
        return new LinearAttentionGradients(dq, perKvHead(dkh), perKvHead(dvh), run, dDecay);
    }

    /** Keys or values {@code [B, Hkv, N, D]} repeated to the query heads, {@code [B, H, N, D]}. */
    private INDArray perQueryHead(INDArray kv) {
        if (s.group() == 1) {
            return kv;
        }
        INDArray out = Nd4j.create(type, s.batch(), s.kvHeads(), s.group(), s.keys(), s.headDim());
        for (int g = 0; g < s.group(); g++) {
            out.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.point(g), NDArrayIndex.all(),
                    NDArrayIndex.all()).assign(kv);
        }
        return out.reshape('c', s.batch(), s.heads(), s.keys(), s.headDim());
    }

    /** Gradients per query head summed over each GQA group, {@code [B, Hkv, N, D]}. */
    private INDArray perKvHead(INDArray g) {
        if (s.group() == 1) {
            return g;
        }
        return g.reshape('c', s.batch(), s.kvHeads(), s.group(), s.keys(), s.headDim()).sum(2);
    }

    /** The positions of chunk t of a {@code [B, H, N, D]} array: a view. */
    private INDArray chunk(INDArray a, int t) {
        int from = starts[t];
        INDArrayIndex[] idx = {NDArrayIndex.all(), NDArrayIndex.all(),
            NDArrayIndex.interval(from, from + plan.length(t)), NDArrayIndex.all()};
        return a.get(idx);
    }

    /** The state entering chunk t, {@code [B, H, D, D]}: a view of {@code [B, H, T, D, D]}. */
    private static INDArray state(INDArray states, int t) {
        return states.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.point(t), NDArrayIndex.all(),
                NDArrayIndex.all());
    }
}
