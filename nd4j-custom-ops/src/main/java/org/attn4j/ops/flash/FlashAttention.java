package org.attn4j.ops.flash;

import org.attn4j.ops.Kernel;
import org.attn4j.ops.Views;
import org.attn4j.ops.WorkerPool;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.BooleanIndexing;
import org.nd4j.linalg.indexing.conditions.Conditions;

/**
 * Exact softmax attention, FlashAttention-2 style (Dao 2023): queries in blocks, keys streamed in
 * blocks with the online softmax, log-sum-exp saved for the backward pass, tiles recomputed there.
 * No {@code N x N} array is ever built; extra memory is O(tile^2) per worker thread.
 *
 * <p>Layout {@code [B, H, N, D]}, C order (other layouts are copied once). k and v may have fewer heads
 * than q (GQA / MQA): query head {@code h} uses kv head {@code h / (H / Hkv)}; k and v are never
 * repeated. FLOAT and DOUBLE; all inputs share one type and the outputs have it. Masks follow global
 * token positions ({@link AttentionMask}); tiles that are fully masked are skipped.
 *
 * <p>A query that sees no key gets output 0, LSE negative infinity and zero gradients. NaN inputs give
 * NaN outputs, never a finite number.
 *
 * <p>This class is the policy layer: defaults, validation and the split over threads happen here
 * once; the kernels take what they are given. Work is split over Java threads (one (batch, head, query
 * block) per task forward; one (batch, kv head, key block) backward); run with {@code OMP_NUM_THREADS=1}
 * so ND4J's own threads do not compete with them (docs/threading.md).
 */
public final class FlashAttention {

    /** Default query-block and key-block size (rows and columns of a score tile). */
    public static final int DEFAULT_BLOCK = 512;
    /**
     * Default query-block size of the backward pass. Its two live 256 x 512 tiles (P and dS) fit in a core's L2
     * cache where two 512 x 512 ones do not; measured here (float32, D = 64, 2 threads): backward 2-5 % faster
     * with 8 heads and N = 2048-8192, 15 % with a causal mask at N = 1024, the same within noise otherwise.
     */
    public static final int DEFAULT_BACKWARD_QUERY_BLOCK = 256;

    private static final String OP = "FlashAttention";
    private static final FlashAttention DEFAULTS =
            new FlashAttention(DEFAULT_BLOCK, DEFAULT_BACKWARD_QUERY_BLOCK, DEFAULT_BLOCK, 0);

    private final int queryBlock;
    private final int backwardQueryBlock;
    private final int keyBlock;
    private final int threads;

    private FlashAttention(int queryBlock, int backwardQueryBlock, int keyBlock, int threads) {
        this.queryBlock = queryBlock;
        this.backwardQueryBlock = backwardQueryBlock;
        this.keyBlock = keyBlock;
        this.threads = threads;
    }

    /** The op with default block sizes and one worker thread per available core. */
    public static FlashAttention defaults() {
        return DEFAULTS;
    }

    /**
     * The op with other tile sizes and thread count.
     *
     * @param queryBlock rows of a score tile in both passes, at least 1
     * @param keyBlock   columns of a score tile, at least 1
     * @param threads    worker threads, or 0 for one per available core
     */
    public static FlashAttention withTiles(int queryBlock, int keyBlock, int threads) {
        if (queryBlock < 1 || keyBlock < 1) {
            throw new IllegalArgumentException(OP + ": block sizes must be >= 1, got query block " + queryBlock
                    + ", key block " + keyBlock);
        }
        if (threads < 0) {
            throw new IllegalArgumentException(OP + ": threads must be >= 0 (0 = one per core), got " + threads);
        }
        return new FlashAttention(queryBlock, queryBlock, keyBlock, threads);
    }

    /**
     * This op's tiles with another thread count.
     *
     * @param threads worker threads, or 0 for one per available core
     */
    public FlashAttention withThreads(int threads) {
        if (threads < 0) {
            throw new IllegalArgumentException(OP + ": threads must be >= 0 (0 = one per core), got " + threads);
        }
        return new FlashAttention(queryBlock, backwardQueryBlock, keyBlock, threads);
    }

    /**
     * What runs flash attention on this machine now, in words: "native AVX-512 tile code" (between and around the
     * float32 tile products), or the Java tile code and why the native code is not in use (turned off by
     * {@code -Dattn4j.noVector=true} or {@code -Dattn4j.nativeTiles=false}; the library not in the build, failed to
     * load, a CPU without AVX-512F, not Linux x86-64; without the Vector API module), or the portable kernel and
     * why. The first flash call logs the same through slf4j: a warning when the build or the host forced the slower
     * path. For logs and benchmark reports.
     *
     * @throws IllegalArgumentException for a value of {@code attn4j.kernel} other than auto, cpu or portable
     */
    public static String tileCode() {
        return TilePath.current().describe();
    }

    /** {@code 1 / sqrt(D)}, the default softmax scale. */
    public static double defaultScale(long headDim) {
        return 1.0 / Math.sqrt(headDim);
    }

    /**
     * The softmax scale in use, the one place where an unset scale becomes the default: {@code scale} when set,
     * else {@link #defaultScale}. Unset is null in the Java API and 0 in SameDiff's op arguments (which cannot
     * hold null); both mean the same here.
     *
     * @param scale   the configured scale, or null or 0 for the default
     * @param headDim the head dimension D
     */
    public static double resolveScale(Double scale, long headDim) {
        return scale == null || scale == 0.0 ? defaultScale(headDim) : scale;
    }

    /** {@link #forward(INDArray, INDArray, INDArray, AttentionMask, double)} with the default scale. */
    public AttentionOutput forward(INDArray q, INDArray k, INDArray v, AttentionMask mask) {
        return forward(q, k, v, mask, defaultScale(q == null || q.rank() != 4 ? 1 : q.size(3)));
    }

    /**
     * Attention output and log-sum-exp.
     *
     * @param q     queries {@code [B, H, Nq, D]}
     * @param k     keys {@code [B, Hkv, Nk, D]}
     * @param v     values {@code [B, Hkv, Nk, D]}
     * @param mask  which keys each query sees
     * @param scale multiplies {@code q.k}; finite and positive
     * @return {@code O [B, H, Nq, D]} and {@code LSE [B, H, Nq]} (natural log, scale applied)
     * @throws IllegalArgumentException on inconsistent shapes, types, heads, masks or scale
     */
    public AttentionOutput forward(INDArray q, INDArray k, INDArray v, AttentionMask mask, double scale) {
        AttentionShapes s = AttentionShapes.of(OP, q, k, v, mask);
        checkScale(scale);
        if (kernel() == Kernel.PORTABLE) {
            return new PortableFlash(s, mask, new TilePlan(mask, s, queryBlock, keyBlock), scale).forward(q, k, v);
        }
        if (s.queries() == 1 && s.dataType() == DataType.FLOAT && TilePath.current().nativeInUse()) {
            int[] run = visibleRun(mask, s.keys());
            if (run != null) {
                return decode(q, k, v, s, run[0], run[1], scale);
            }
        }
        INDArray qc = Views.plain(q);
        KeyValues kv = KeyValues.of(k, v, s);
        // Every row of both is written by the kernels (rows that see no key too): no zeroing first.
        INDArray out = Nd4j.createUninitialized(s.dataType(), s.batch(), s.heads(), s.queries(), s.headDim());
        INDArray lse = Nd4j.createUninitialized(s.dataType(), s.batch(), s.heads(), s.queries());
        TilePlan plan = new TilePlan(mask, s, queryBlock, keyBlock);
        int perHead = plan.queryBlocks;
        int items = s.batch() * s.heads() * perHead;
        double flops = 4.0 * s.batch() * s.heads() * s.queries() * s.keys() * s.headDim();
        boolean packed = PackedTranspose.applies(s);
        WorkerPool.run(WorkerPool.workers(threads, items, flops), items,
                w -> new ForwardKernel(qc, kv.k(), kv.v(), kv.rowsPerHead(), out, lse, s, plan, scale, packed),
                // Last query blocks first: under a causal mask they see the most keys, and the lightest finish last.
                (kernel, item) -> kernel.run(item / (s.heads() * perHead), item / perHead % s.heads(),
                        perHead - 1 - item % perHead), !PackedTranspose.withoutNativeThreads(packed));
        return new AttentionOutput(out, lse);
    }

    /**
     * The keys and values the forward kernels read, and the rows from one head to the next in their buffers: in
     * place when each head's rows are consecutive (a key/value cache with room to grow), else plain copies.
     */
    private record KeyValues(INDArray k, INDArray v, long rowsPerHead) {
        static KeyValues of(INDArray k, INDArray v, AttentionShapes s) {
            long keyRows = Views.headRows(k);
            boolean inPlace = keyRows > 0 && keyRows == Views.headRows(v);
            return inPlace ? new KeyValues(k, v, keyRows) : new KeyValues(Views.plain(k), Views.plain(v), s.keys());
        }
    }

    /**
     * The keys {@code [lo, hi)} that a single query sees, when they form one run (causal and window rules on any
     * positions); null when they do not, or when padding or documents decide too.
     */
    static int[] visibleRun(AttentionMask mask, int keys) {
        if (mask.keyPadding() != null || mask.documents() != null) {
            return null;
        }
        int query = mask.queryPositionsOrDefault(1)[0];
        int[] positions = mask.keyPositionsOrDefault(keys);
        int lo = -1;
        int hi = -1;
        for (int j = 0; j < keys; j++) {
            if (mask.allows(query, positions[j])) {
                if (hi >= 0) {
                    return null;                        // a second run
                }
                if (lo < 0) {
                    lo = j;
                }
            } else if (lo >= 0 && hi < 0) {
                hi = j;
            }
        }
        return lo < 0 ? new int[] {0, 0} : new int[] {lo, hi < 0 ? keys : hi};
    }

    /**
     * A decoding step's attention, one query per head, in float32 with the native code: each key/value head's
     * rows {@code [lo, hi)} are read once for all the query heads that share it (NativeTileMath#decodeHeads), where
     * the tiled kernel packs and tiles them for every head around a one-row tile (at 4096 keys, 9 heads over 3:
     * 3.2 ms a call there, 0.5 ms here). One thread: split over two, the same call took longer here.
     */
    private static AttentionOutput decode(INDArray q, INDArray k, INDArray v, AttentionShapes s, int lo, int hi,
                                          double scale) {
        INDArray qc = Views.plain(q);
        KeyValues kv = KeyValues.of(k, v, s);
        int d = s.headDim();
        int group = s.group();
        INDArray out = Nd4j.createUninitialized(DataType.FLOAT, s.batch(), s.heads(), 1, d);
        INDArray lse = Nd4j.createUninitialized(DataType.FLOAT, s.batch(), s.heads(), 1);
        INDArray scores = Nd4j.createUninitialized(DataType.FLOAT, (long) group * Math.max(1, hi - lo));
        for (int g = 0; g < s.batch() * s.kvHeads(); g++) {
            long head = (long) g / s.kvHeads() * s.heads() + (long) g % s.kvHeads() * group;   // its first query
            NativeTileMath.decodeHeads(qc, head * d, kv.k(), kv.v(), g * kv.rowsPerHead() * d, d, lo, hi, group,
                    scale, scores, out, head * d, lse, head);
        }
        return new AttentionOutput(out, lse);
    }

    /**
     * Gradients of {@code sum(O * dO)} with respect to q, k and v, recomputing the score tiles.
     *
     * @param o    the output of {@link #forward} for these inputs
     * @param lse  the LSE of {@link #forward} for these inputs
     * @param dOut gradient of the loss with respect to O {@code [B, H, Nq, D]}
     * @return dQ, dK, dV in the shapes and type of q, k, v
     * @throws IllegalArgumentException on inconsistent shapes, types, heads, masks or scale
     */
    public AttentionGradients backward(INDArray q, INDArray k, INDArray v, INDArray o, INDArray lse,
                                       INDArray dOut, AttentionMask mask, double scale) {
        AttentionShapes s = AttentionShapes.of(OP, q, k, v, mask);
        s.requireShape(OP, "o", o, q.shape());
        return backward(s, q, k, v, delta(o, dOut), lse, dOut, mask, scale);
    }

    /**
     * {@link #backward} given {@code Delta = rowsum(O * dO)} instead of O: what a distributed backward pass sends
     * in place of the output rows (BurstAttention, algorithm 2, line 2), {@code [B, H, Nq]} instead of
     * {@code [B, H, Nq, D]}.
     *
     * @param delta {@link #delta} of the output and its gradient
     * @throws IllegalArgumentException on inconsistent shapes, types, heads, masks or scale
     */
    public AttentionGradients backwardFromDelta(INDArray q, INDArray k, INDArray v, INDArray delta, INDArray lse,
                                                INDArray dOut, AttentionMask mask, double scale) {
        AttentionShapes s = AttentionShapes.of(OP, q, k, v, mask);
        s.requireShape(OP, "delta", delta, s.batch(), s.heads(), s.queries());
        return backward(s, q, k, v, delta, lse, dOut, mask, scale);
    }

    /** {@code Delta = rowsum(O * dO)} over the head dimension, {@code [B, H, Nq]}. */
    public static INDArray delta(INDArray o, INDArray dOut) {
        return o.mul(dOut).sum(3);
    }

    private AttentionGradients backward(AttentionShapes s, INDArray q, INDArray k, INDArray v, INDArray delta,
                                        INDArray lse, INDArray dOut, AttentionMask mask, double scale) {
        checkScale(scale);
        s.requireShape(OP, "dO", dOut, q.shape());
        s.requireShape(OP, "lse", lse, s.batch(), s.heads(), s.queries());
        if (kernel() == Kernel.PORTABLE) {
            return new PortableFlash(s, mask, new TilePlan(mask, s, backwardQueryBlock, keyBlock), scale)
                    .backward(q, k, v, lse, delta, dOut);
        }
        INDArray qc = Views.plain(q);
        INDArray kc = Views.plain(k);
        INDArray vc = Views.plain(v);
        INDArray doc = Views.plain(dOut);
        INDArray negLse = lse.neg();
        // Rows that saw no key (LSE = -inf) shift by 0: their masked scores are -inf, so P stays 0, not NaN.
        BooleanIndexing.replaceWhere(negLse, 0.0, Conditions.isInfinite());
        INDArray negDelta = delta.neg();
        INDArray dk = Nd4j.create(s.dataType(), k.shape());
        INDArray dv = Nd4j.create(s.dataType(), k.shape());
        TilePlan plan = new TilePlan(mask, s, backwardQueryBlock, keyBlock);
        boolean packed = PackedTranspose.applies(s);
        int perHead = plan.keyBlocks;
        int heads = s.batch() * s.kvHeads();
        if (heads % WorkerPool.workers(threads, Integer.MAX_VALUE) == 0) {
            // Whole (batch, kv head) pairs per thread, as many for each: a thread owns its heads' rows of dQ too, so
            // one dQ serves all threads instead of one per thread (64 MB each with 8 heads at N = 32768). Measured
            // with 8 heads, N = 1024-4096: backward time within -5 % to +3 % of splitting by key block.
            INDArray dq = Nd4j.create(s.dataType(), q.shape());
            WorkerPool.run(WorkerPool.workers(threads, heads), heads,
                    w -> new BackwardKernel(qc, kc, vc, doc, negLse, negDelta, dq, dk, dv, s, plan, scale, packed),
                    (kernel, item) -> {
                        for (int kb = 0; kb < perHead; kb++) {
                            kernel.run(item / s.kvHeads(), item % s.kvHeads(), kb);
                        }
                    }, !PackedTranspose.withoutNativeThreads(packed));
            return new AttentionGradients(dq, dk, dv);
        }
        // Fewer heads than threads can share evenly: key blocks are the items, and each thread adds to a dQ of its own.
        int items = heads * perHead;
        int workers = WorkerPool.workers(threads, items);
        INDArray[] dqs = new INDArray[workers];
        for (int w = 0; w < workers; w++) {
            dqs[w] = Nd4j.create(s.dataType(), q.shape());
        }
        WorkerPool.run(workers, items,
                w -> new BackwardKernel(qc, kc, vc, doc, negLse, negDelta, dqs[w], dk, dv, s, plan, scale, packed),
                (kernel, item) -> kernel.run(item / (s.kvHeads() * perHead), item / perHead % s.kvHeads(),
                        item % perHead), !PackedTranspose.withoutNativeThreads(packed));
        INDArray dq = dqs[0];
        for (int w = 1; w < workers; w++) {
            dq.addi(dqs[w]);
        }
        return new AttentionGradients(dq, dk, dv);
    }

    /** The kernel this call runs; the first call on each path logs which it is and why ({@link TilePath}). */
    private static Kernel kernel() {
        TilePath path = TilePath.current();
        path.logOnce();
        return path.kernel();
    }

    private static void checkScale(double scale) {
        if (!(scale > 0) || Double.isInfinite(scale)) {
            throw new IllegalArgumentException(OP + ": scale must be finite and > 0, got " + scale);
        }
    }

    @Override
    public String toString() {
        return OP + "{queryBlock=" + queryBlock + ", backwardQueryBlock=" + backwardQueryBlock + ", keyBlock="
                + keyBlock + ", threads=" + (threads == 0 ? "per core" : threads) + "}";
    }
}
