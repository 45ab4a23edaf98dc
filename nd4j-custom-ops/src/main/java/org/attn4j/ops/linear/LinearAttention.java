package org.attn4j.ops.linear;

import java.util.Arrays;

import org.attn4j.ops.Documents;
import org.attn4j.ops.Kernel;
import org.attn4j.ops.Views;
import org.attn4j.ops.WorkerPool;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionShapes;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Linear attention with decay, without normalisation inside the op (the lightning / TransNormerLLM form
 * that LASP parallelises; LASP section 2.2, equations 4-19, algorithms 2-3):
 * <pre>
 *   causal:      o_s = q_s^T kv_s,   kv_s = lambda kv_(s-1) + k_s v_s^T,   kv_(-1) = kvIn
 *   non-causal:  O = Q (kvIn + K^T V)                                        (lambda must be 1)
 * </pre>
 * q and k are multiplied as given (no scale, no feature map). The causal form runs in chunks of
 * {@code C} positions as LASP does on each device: inside a chunk the masked product with the decay
 * matrix {@code M_ij = lambda^(i-j)} (intra), across chunks the {@code D x D} state (inter), so time and
 * memory are linear in N:
 * <pre>
 *   O_t  = [(Q_t K_t^T) . M] V_t + Lambda Q_t S_(t-1)              Lambda = diag(lambda^1..lambda^c)
 *   S_t  = lambda^c S_(t-1) + (diag(lambda^(c-1-j)) K_t)^T V_t
 * </pre>
 * and backward, with {@code H_t} the gradient of the state leaving chunk t ({@code H_last = dKvOut}):
 * <pre>
 *   dQ_t = [(dO_t V_t^T) . M] K_t + Lambda dO_t S_(t-1)^T
 *   dK_t = [(dO_t V_t^T) . M]^T Q_t + diag(lambda^(c-1-j)) V_t H_t^T
 *   dV_t = [(Q_t K_t^T) . M]^T dO_t + diag(lambda^(c-1-j)) K_t H_t
 *   H_(t-1) = lambda^c H_t + (Lambda Q_t)^T dO_t,       dKvIn = H_(-1)
 * </pre>
 * The intra parts of all chunks run in parallel over Java threads; only the two scans over the
 * {@code D x D} states are sequential per head. The states entering each chunk are kept from the forward
 * pass for the backward pass ("KV state caching"); passing {@code kvOut} of one segment as {@code kvIn}
 * of the next, and {@code dKvIn} of the next back as {@code dKvOut}, equals running the whole sequence.
 *
 * <p>For a learned decay, {@link #withDecayGradient()} also returns {@code dL/dlambda} per query head,
 * {@code sum_s <dL/dkv_s, kv_(s-1)>} (see {@code ChunkKernel}).
 *
 * <p>Packed sequences ({@link Documents}): the state starts afresh at every document (the decayed sum never
 * crosses one), padding gives zero output and gradients and adds nothing to the state. Chunks are then also cut
 * at every document boundary, so a chunk lies in one document; the incoming state {@code kvIn} joins the first
 * position only when it continues the document of the position before the call.
 *
 * <p>Layout {@code [B, H, N, D]}; k and v may have fewer heads (GQA: query head h reads kv head
 * {@code h / (H / Hkv)}); states are per query head, {@code [B, H, D, D]}. FLOAT or DOUBLE.
 */
public final class LinearAttention {

    /** Default chunk size. */
    public static final int DEFAULT_CHUNK = 256;

    private static final String OP = "LinearAttention";
    private static final LinearAttention DEFAULTS = new LinearAttention(DEFAULT_CHUNK, 0, false);

    private final int chunk;
    private final int threads;
    private final boolean decayGradient;

    private LinearAttention(int chunk, int threads, boolean decayGradient) {
        this.chunk = chunk;
        this.threads = threads;
        this.decayGradient = decayGradient;
    }

    /** The op with the default chunk size and one thread per core. */
    public static LinearAttention defaults() {
        return DEFAULTS;
    }

    /**
     * The op with another chunk size and thread count.
     *
     * @param chunk   positions per chunk, at least 1
     * @param threads worker threads, 0 for one per core
     */
    public static LinearAttention withChunk(int chunk, int threads) {
        if (chunk < 1) {
            throw new IllegalArgumentException(OP + ": chunk size must be >= 1, got " + chunk);
        }
        if (threads < 0) {
            throw new IllegalArgumentException(OP + ": threads must be >= 0 (0 = one per core), got " + threads);
        }
        return new LinearAttention(chunk, threads, false);
    }

    /**
     * This op, also computing dL/dlambda per query head in {@link LinearAttentionGradients#dDecay()} (for a
     * learned decay); costs a few more element-wise tile operations in the backward pass.
     */
    public LinearAttention withDecayGradient() {
        return new LinearAttention(chunk, threads, true);
    }

    /**
     * Output and final state.
     *
     * @param q      {@code [B, H, N, D]}
     * @param k      {@code [B, Hkv, N, D]}
     * @param v      {@code [B, Hkv, N, D]}
     * @param decay  one lambda, or one per query head; must be 1 when not causal
     * @param causal whether position s sees only positions {@code <= s}
     * @param kvIn   incoming state {@code [B, H, D, D]}, or null for zero
     * @throws IllegalArgumentException on inconsistent shapes, types, decay or state
     */
    public LinearAttentionOutput forward(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal,
                                         INDArray kvIn) {
        return forward(q, k, v, decay, causal, kvIn, null, 0);
    }

    /**
     * Output and final state of a packed sequence: {@link #forward(INDArray, INDArray, INDArray, Decay, boolean,
     * INDArray)} within each document.
     *
     * @param documents ids {@code [B, N]} of this call's positions, or null for one document
     */
    public LinearAttentionOutput forward(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal,
                                         INDArray kvIn, Documents documents) {
        if (documents != null && q != null && q.rank() == 4) {
            documents.requireSize(OP, q.size(0), q.size(2));
        }
        return forward(q, k, v, decay, causal, kvIn, documents, 0);
    }

    /**
     * Output and final state of positions {@code first .. first + N - 1} of a packed sequence (a segment, or a
     * worker's shard): the documents are by global position, and {@code kvIn} is the state after position
     * {@code first - 1}.
     *
     * @param documents ids {@code [B, >= first + N]} by global position, or null for one document
     * @param first     the global position of this call's first position
     */
    public LinearAttentionOutput forward(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal,
                                         INDArray kvIn, Documents documents, int first) {
        AttentionShapes s = validate(q, k, v, decay, causal);
        checkDocuments(s, documents, first);
        checkState(s, "kvIn", kvIn);
        INDArray qc = Views.plain(q);
        INDArray kc = Views.plain(k);
        INDArray vc = Views.plain(v);
        INDArray kin = kvIn == null ? null : Views.plain(kvIn);
        // Outputs and states start uninitialised: every element is written by a gemm with beta 0 before it is
        // read (zeroing 1 GB of outputs at N = 1M cost about 10 % of the call).
        INDArray out = Nd4j.createUninitialized(s.dataType(), q.shape());
        INDArray kvOut = Nd4j.createUninitialized(s.dataType(), s.batch(), s.heads(), s.headDim(), s.headDim());
        if (!causal) {
            NonCausal.forward(s, qc, kc, vc, kin, out, kvOut, documents, first);
            return new LinearAttentionOutput(out, kvOut, new LinearAttentionCache(null, 0, null));
        }
        ChunkPlan plan = new ChunkPlan(s, decay, chunk, documents, first);
        if (Kernel.current() == Kernel.PORTABLE) {
            return new PortableLinear(s, plan).forward(q, k, v, kvIn);
        }
        INDArray states = Nd4j.createUninitialized(s.dataType(), s.batch(), s.heads(), plan.chunks, s.headDim(),
                s.headDim());
        int perHead = plan.chunks;
        int heads = s.batch() * s.heads();
        // Per token: the state's update and read (4 D^2) and the intra-chunk products (4 chunk D).
        double flops = 4.0 * heads * s.queries() * s.headDim() * (s.headDim() + plan.chunk);
        ChunkKernel[] kernels = kernels(s, plan, WorkerPool.workers(threads, heads * perHead, flops), false);
        WorkerPool.run(kernels.length, heads * perHead, w -> kernels[w],
                (kern, i) -> kern.forwardIntra(qc, kc, vc, out, states, i / perHead / s.heads(),
                        i / perHead % s.heads(), i % perHead));
        WorkerPool.run(Math.min(kernels.length, heads), heads, w -> kernels[w],
                (kern, i) -> kern.forwardScan(states, kin, kvOut, i / s.heads(), i % s.heads()));
        WorkerPool.run(kernels.length, heads * perHead, w -> kernels[w],
                (kern, i) -> kern.forwardInter(qc, out, states, i / perHead / s.heads(), i / perHead % s.heads(),
                        i % perHead));
        return new LinearAttentionOutput(out, kvOut, new LinearAttentionCache(states, plan.chunk, plan.starts()));
    }

    /**
     * Gradients of the loss with respect to q, k, v and the incoming state.
     *
     * @param dOut   gradient with respect to O {@code [B, H, N, D]}
     * @param dKvOut gradient with respect to {@code kvOut} {@code [B, H, D, D]} (from the segment after this
     *               one), or null for zero
     * @param cache  the cache of the forward call on the same inputs, or null to rebuild it
     * @throws IllegalArgumentException on inconsistent shapes, types, decay, state or cache
     */
    public LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal,
                                             INDArray kvIn, INDArray dOut, INDArray dKvOut,
                                             LinearAttentionCache cache) {
        return backward(q, k, v, decay, causal, kvIn, dOut, dKvOut, cache, null, 0);
    }

    /**
     * Gradients of a packed sequence, given the documents of the forward call.
     *
     * @param documents ids {@code [B, N]} of this call's positions, or null for one document
     */
    public LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal,
                                             INDArray kvIn, INDArray dOut, INDArray dKvOut,
                                             LinearAttentionCache cache, Documents documents) {
        if (documents != null && q != null && q.rank() == 4) {
            documents.requireSize(OP, q.size(0), q.size(2));
        }
        return backward(q, k, v, decay, causal, kvIn, dOut, dKvOut, cache, documents, 0);
    }

    /**
     * Gradients of positions {@code first .. first + N - 1} of a packed sequence, given the forward call's
     * documents and first position.
     */
    public LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal,
                                             INDArray kvIn, INDArray dOut, INDArray dKvOut,
                                             LinearAttentionCache cache, Documents documents, int first) {
        AttentionShapes s = validate(q, k, v, decay, causal);
        checkDocuments(s, documents, first);
        checkState(s, "kvIn", kvIn);
        checkState(s, "dKvOut", dKvOut);
        s.requireShape(OP, "dO", dOut, q.shape());
        INDArray qc = Views.plain(q);
        INDArray kc = Views.plain(k);
        INDArray vc = Views.plain(v);
        INDArray doc = Views.plain(dOut);
        INDArray dkout = dKvOut == null ? null : Views.plain(dKvOut);
        INDArray dq = Nd4j.createUninitialized(s.dataType(), q.shape());
        INDArray dk = Nd4j.createUninitialized(s.dataType(), k.shape());
        INDArray dv = Nd4j.createUninitialized(s.dataType(), k.shape());
        INDArray dKvIn = Nd4j.createUninitialized(s.dataType(), s.batch(), s.heads(), s.headDim(), s.headDim());
        if (!causal) {
            INDArray kin = kvIn == null ? null : Views.plain(kvIn);
            NonCausal.backward(s, qc, kc, vc, kin, doc, dkout, dq, dk, dv, dKvIn, documents, first);
            // No decay in the non-causal form: its gradient is zero.
            INDArray dDecay = decayGradient ? Nd4j.zeros(s.dataType(), s.heads()) : null;
            return new LinearAttentionGradients(dq, dk, dv, dKvIn, dDecay);
        }
        ChunkPlan plan = new ChunkPlan(s, decay, chunk, documents, first);
        INDArray states = cachedStates(s, plan, cache, q, k, v, decay, kvIn, documents, first);
        if (Kernel.current() == Kernel.PORTABLE) {
            return new PortableLinear(s, plan).backward(q, k, v, dOut, dKvOut, states, decayGradient);
        }
        INDArray dStates = Nd4j.createUninitialized(s.dataType(), s.batch(), s.heads(), plan.chunks, s.headDim(),
                s.headDim());
        int perHead = plan.chunks;
        int kvItems = s.batch() * s.kvHeads() * perHead;
        ChunkKernel[] kernels = kernels(s, plan, WorkerPool.workers(threads, kvItems), decayGradient);
        int workers = kernels.length;
        WorkerPool.run(workers, kvItems, w -> kernels[w],
                (kern, i) -> kern.backwardIntra(qc, kc, vc, doc, states, dStates, dq, dk, dv,
                        i / perHead / s.kvHeads(), i / perHead % s.kvHeads(), i % perHead));
        WorkerPool.run(Math.min(workers, s.batch() * s.heads()), s.batch() * s.heads(), w -> kernels[w],
                (kern, i) -> kern.backwardScan(dStates, dkout, dKvIn, i / s.heads(), i % s.heads()));
        WorkerPool.run(workers, kvItems, w -> kernels[w],
                (kern, i) -> kern.backwardInter(kc, vc, states, dStates, dk, dv, i / perHead / s.kvHeads(),
                        i / perHead % s.kvHeads(), i % perHead));
        INDArray dDecay = null;
        if (decayGradient) {
            double[] sum = new double[s.heads()];
            for (ChunkKernel k0 : kernels) {
                for (int h = 0; h < sum.length; h++) {
                    sum[h] += k0.dDecay[h];
                }
            }
            dDecay = Nd4j.createFromArray(sum).castTo(s.dataType());
        }
        return new LinearAttentionGradients(dq, dk, dv, dKvIn, dDecay);
    }

    private INDArray cachedStates(AttentionShapes s, ChunkPlan plan, LinearAttentionCache cache, INDArray q,
                                  INDArray k, INDArray v, Decay decay, INDArray kvIn, Documents documents,
                                  int first) {
        if (cache == null) {
            return DEFAULTS.withChunkOf(plan.chunk, threads).forward(q, k, v, decay, true, kvIn, documents, first)
                    .cache().states;
        }
        if (cache.released()) {
            throw new IllegalArgumentException(OP + ": the cache was released; pass null to rebuild the states, "
                    + "or keep the cache until the backward pass");
        }
        long[] expected = {s.batch(), s.heads(), plan.chunks, s.headDim(), s.headDim()};
        if (cache.states == null || cache.chunk != plan.chunk
                || !Arrays.equals(cache.states.shape(), expected) || !plan.sameChunks(cache.starts)) {
            throw new IllegalArgumentException(OP + ": the cache does not belong to this call: expected states "
                    + Arrays.toString(expected) + " with chunk " + plan.chunk + ", got "
                    + (cache.states == null ? "a non-causal cache" : Arrays.toString(cache.states.shape())
                    + " with chunk " + cache.chunk));
        }
        return cache.states;
    }

    /** One kernel per worker thread, shared by the phases of a call so scratch buffers are allocated once. */
    private static ChunkKernel[] kernels(AttentionShapes s, ChunkPlan plan, int workers, boolean decayGradient) {
        ChunkKernel[] k = new ChunkKernel[workers];
        for (int w = 0; w < workers; w++) {
            k[w] = new ChunkKernel(s, plan, decayGradient);
        }
        return k;
    }

    private LinearAttention withChunkOf(int c, int t) {
        return new LinearAttention(c, t, false);
    }

    private static AttentionShapes validate(INDArray q, INDArray k, INDArray v, Decay decay, boolean causal) {
        AttentionShapes s = AttentionShapes.of(OP, q, k, v, AttentionMask.none());
        if (s.keys() != s.queries()) {
            throw new IllegalArgumentException(OP + ": k has " + s.keys() + " positions, q has " + s.queries()
                    + "; linear attention needs one key per query");
        }
        if (decay == null) {
            throw new IllegalArgumentException(OP + ": decay is null; pass Decay.none() for lambda = 1");
        }
        decay.checkHeads(OP, s.heads());
        if (!causal && !decay.isNone()) {
            throw new IllegalArgumentException(OP + ": decay " + decay + " needs causal attention; the "
                    + "non-causal form O = Q (K^T V) has no order to decay along (use lambda = 1)");
        }
        return s;
    }

    private static void checkDocuments(AttentionShapes s, Documents documents, int first) {
        if (documents == null) {
            return;
        }
        if (first < 0 || documents.batch() != s.batch() || (long) first + s.queries() > documents.length()) {
            throw new IllegalArgumentException(OP + ": document ids must cover " + s.batch() + " sequences and "
                    + "positions " + first + ".." + ((long) first + s.queries() - 1) + " of this call, got ["
                    + documents.batch() + ", " + documents.length() + "]");
        }
    }

    private static void checkState(AttentionShapes s, String name, INDArray state) {
        if (state != null) {
            s.requireShape(OP, name, state, s.batch(), s.heads(), s.headDim(), s.headDim());
        }
    }

    @Override
    public String toString() {
        return OP + "{chunk=" + chunk + ", threads=" + (threads == 0 ? "per core" : threads) + "}";
    }
}
