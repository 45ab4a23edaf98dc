package org.attn4j.ops.flash;

import org.attn4j.ops.BlockScope;
import org.attn4j.ops.Documents;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.BooleanIndexing;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.conditions.Conditions;
import org.nd4j.linalg.ops.transforms.Transforms;

/**
 * Flash attention made only of ND4J operations, which every backend runs on its own device: batched matrix
 * products over all (batch, head) pairs of a tile at once, exponentials, row maxima and sums, and masks computed
 * from position, padding and document arrays by comparisons. Nothing is read or written element by element on
 * the host, so a GPU backend keeps the work on the GPU. The same algorithm as the CPU kernel (FlashAttention-2:
 * online softmax forward with the log-sum-exp kept, tiles recomputed in the backward pass) and the same results;
 * extra memory is O(B H x query block x key block) per tile, never {@code N x N}.
 *
 * <p>GQA: the query heads of one key/value head are adjacent ({@code h = kv * G + j}), so a query block
 * {@code [B, H, bq, D]} is read as {@code [B, Hkv, G bq, D]}: one product per key/value head, and the key/value
 * gradients sum over the group by themselves.
 *
 * <p>Masked scores get {@code log(0) = -inf} added: {@code exp} makes them exactly 0. The running maximum of a row
 * that has seen no key yet is {@code -inf}; it shifts by 0 instead, so no {@code -inf - -inf} arises.
 */
final class PortableFlash {

    private final AttentionShapes s;
    private final AttentionMask mask;
    private final TilePlan plan;
    private final double scale;
    private final DataType type;
    /** Global positions of the queries and keys, INT {@code [Nq]} and {@code [Nk]}. */
    private final INDArray queryPositions;
    private final INDArray keyPositions;
    /** {@code [B, 1, 1, 1, Nk]}: 0 for a real key, -inf for padding; null without key padding. */
    private final INDArray paddingBias;
    /** Document ids at the queries' and keys' positions, INT {@code [B, Nq]} and {@code [B, Nk]}; null without. */
    private final INDArray queryDocs;
    private final INDArray keyDocs;

    PortableFlash(AttentionShapes s, AttentionMask mask, TilePlan plan, double scale) {
        this.s = s;
        this.mask = mask;
        this.plan = plan;
        this.scale = scale;
        this.type = s.dataType();
        int[] qPos = mask.queryPositionsOrDefault(s.queries());
        int[] kPos = mask.keyPositionsOrDefault(s.keys());
        this.queryPositions = Nd4j.createFromArray(qPos);
        this.keyPositions = Nd4j.createFromArray(kPos);
        INDArray padding = mask.keyPadding();
        this.paddingBias = padding == null ? null
                : Transforms.log(padding.gt(0).castTo(type), false).reshape(s.batch(), 1, 1, 1, s.keys());
        Documents docs = mask.documents();
        if (docs == null) {
            this.queryDocs = null;
            this.keyDocs = null;
        } else {
            this.queryDocs = Nd4j.createFromArray(idsAt(docs, qPos));
            this.keyDocs = Nd4j.createFromArray(idsAt(docs, kPos));
        }
    }

    private static int[][] idsAt(Documents docs, int[] positions) {
        int[][] ids = new int[docs.batch()][positions.length];
        for (int b = 0; b < ids.length; b++) {
            for (int i = 0; i < positions.length; i++) {
                ids[b][i] = docs.id(b, positions[i]);
            }
        }
        return ids;
    }

    /** Output {@code [B, H, Nq, D]} and log-sum-exp {@code [B, H, Nq]}. */
    AttentionOutput forward(INDArray q, INDArray k, INDArray v) {
        INDArray out = Nd4j.create(type, s.batch(), s.heads(), s.queries(), s.headDim());
        INDArray lse = Nd4j.create(type, s.batch(), s.heads(), s.queries());
        for (int qb = 0; qb < plan.queryBlocks; qb++) {
            try (MemoryWorkspace ws = BlockScope.enter("attn4j-portable-tiles")) {
                forwardRows(q, k, v, out, lse, qb);
            }
        }
        return new AttentionOutput(out, lse);
    }

    /** Query block {@code qb}: its output rows and log-sum-exps, written into {@code out} and {@code lse}. */
    private void forwardRows(INDArray q, INDArray k, INDArray v, INDArray out, INDArray lse, int qb) {
        int b = s.batch();
        int kv = s.kvHeads();
        int d = s.headDim();
        int q0 = plan.queryStart(qb);
        int rows = plan.queryRows(qb);
        long groupRows = (long) s.group() * rows;
        INDArray qBlock = rows(q, q0, rows).dup('c').reshape('c', b, kv, groupRows, d);
        INDArray m = Nd4j.valueArrayOf(new long[] {b, kv, groupRows, 1}, Double.NEGATIVE_INFINITY, type);
        INDArray l = Nd4j.zeros(type, b, kv, groupRows, 1);
        INDArray acc = Nd4j.zeros(type, b, kv, groupRows, d);
        for (int kb = 0; kb < plan.keyBlocks; kb++) {
            TilePlan.Kind kind = kind(qb, kb);
            if (kind == TilePlan.Kind.SKIP) {
                continue;
            }
            int k0 = plan.keyStart(kb);
            int cols = plan.keyCols(kb);
            INDArray scores = scores(qBlock, rows(k, k0, cols), qb, kb, kind);
            INDArray mNew = Transforms.max(m, scores.max(true, 3), true);
            INDArray shift = finite(mNew);
            INDArray p = Transforms.exp(scores.subi(shift), false);
            INDArray alpha = Transforms.exp(m.subi(shift), false);
            l.muli(alpha).addi(p.sum(true, 3));
            acc.muli(alpha).addi(Nd4j.matmul(p, rows(v, k0, cols)));
            m = mNew;
        }
        // A row that saw no key: l = 0, output 0 (1/0 replaced by 0) and LSE = -inf + log 0 = -inf.
        INDArray inv = l.rdiv(1.0);
        BooleanIndexing.replaceWhere(inv, 0.0, Conditions.isInfinite());
        rows(out, q0, rows).assign(acc.muli(inv).reshape('c', b, s.heads(), rows, d));
        lse.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(q0, q0 + rows))
                .assign(m.addi(Transforms.log(l, false)).reshape('c', b, s.heads(), rows));
    }

    /**
     * Gradients with respect to q, k and v, from the log-sum-exp and {@code Delta = rowsum(O * dO)}.
     */
    AttentionGradients backward(INDArray q, INDArray k, INDArray v, INDArray lse, INDArray delta, INDArray dOut) {
        int b = s.batch();
        // Rows that saw no key (LSE = -inf) shift by 0: their scores are -inf wherever masked, so P stays 0.
        INDArray shift = finite(lse).reshape('c', b, s.heads(), s.queries(), 1);
        INDArray delta4 = delta.reshape('c', b, s.heads(), s.queries(), 1);
        INDArray dq = Nd4j.zeros(type, q.shape());
        INDArray dk = Nd4j.zeros(type, k.shape());
        INDArray dv = Nd4j.zeros(type, k.shape());
        for (int kb = 0; kb < plan.keyBlocks; kb++) {
            try (MemoryWorkspace ws = BlockScope.enter("attn4j-portable-tiles")) {
                backwardColumns(q, k, v, dOut, shift, delta4, dq, dk, dv, kb);
            }
        }
        return new AttentionGradients(dq, dk, dv);
    }

    /** Key block {@code kb}: its rows of dK and dV, and what it adds to dQ. */
    private void backwardColumns(INDArray q, INDArray k, INDArray v, INDArray dOut, INDArray shift, INDArray delta4,
                                 INDArray dq, INDArray dk, INDArray dv, int kb) {
        int b = s.batch();
        int kv = s.kvHeads();
        int d = s.headDim();
        int k0 = plan.keyStart(kb);
        int cols = plan.keyCols(kb);
        INDArray kBlock = rows(k, k0, cols);
        INDArray vBlock = rows(v, k0, cols);
        INDArray dkBlock = Nd4j.zeros(type, b, kv, cols, d);
        INDArray dvBlock = Nd4j.zeros(type, b, kv, cols, d);
        for (int qb = 0; qb < plan.queryBlocks; qb++) {
            TilePlan.Kind kind = kind(qb, kb);
            if (kind == TilePlan.Kind.SKIP) {
                continue;
            }
            int q0 = plan.queryStart(qb);
            int rows = plan.queryRows(qb);
            INDArray qBlock = grouped(q, q0, rows);
            INDArray doBlock = grouped(dOut, q0, rows);
            INDArray p = Transforms.exp(scores(qBlock, kBlock, qb, kb, kind)
                    .subi(grouped(shift, q0, rows)), false);
            dvBlock.addi(Nd4j.matmul(p, doBlock, true, false, false));
            INDArray dS = Nd4j.matmul(doBlock, vBlock, false, true, false).subi(grouped(delta4, q0, rows))
                    .muli(p).muli(scale);
            rows(dq, q0, rows).addi(Nd4j.matmul(dS, kBlock).reshape('c', b, s.heads(), rows, d));
            dkBlock.addi(Nd4j.matmul(dS, qBlock, true, false, false));
        }
        rows(dk, k0, cols).assign(dkBlock);
        rows(dv, k0, cols).assign(dvBlock);
    }

    /** Scores {@code scale q k^T} of one tile, {@code [B, Hkv, G bq, bk]}, with the mask added when partial. */
    private INDArray scores(INDArray qBlock, INDArray kBlock, int qb, int kb, TilePlan.Kind kind) {
        INDArray scores = Nd4j.matmul(qBlock, kBlock, false, true, false).muli(scale);
        if (kind == TilePlan.Kind.PARTIAL) {
            int rows = plan.queryRows(qb);
            int cols = plan.keyCols(kb);
            INDArray tile = scores.reshape('c', s.batch(), s.kvHeads(), s.group(), rows, cols);
            addMask(tile, plan.queryStart(qb), rows, plan.keyStart(kb), cols);
        }
        return scores;
    }

    /** Adds 0 where the mask lets a query see a key and -inf elsewhere, to a tile {@code [B, Hkv, G, bq, bk]}. */
    private void addMask(INDArray tile, int q0, int rows, int k0, int cols) {
        INDArray qp = queryPositions.get(NDArrayIndex.interval(q0, q0 + rows)).reshape(rows, 1);
        INDArray kp = keyPositions.get(NDArrayIndex.interval(k0, k0 + cols)).reshape(1, cols);
        INDArray diff = qp.sub(kp);                                   // i - j, INT [bq, bk]
        INDArray allowed = null;
        if (mask.isCausal()) {
            allowed = diff.gte(0);
        }
        if (mask.window() > 0) {
            INDArray near = (mask.isCausal() ? diff : Transforms.abs(diff, true)).lt(mask.window());
            allowed = allowed == null ? near : Transforms.and(allowed, near);
        }
        if (allowed != null) {
            tile.addi(bias(allowed).reshape(1, 1, 1, rows, cols));
        }
        if (paddingBias != null) {
            tile.addi(paddingBias.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all(),
                    NDArrayIndex.interval(k0, k0 + cols)));
        }
        if (queryDocs != null) {
            INDArray qd = queryDocs.get(NDArrayIndex.all(), NDArrayIndex.interval(q0, q0 + rows))
                    .reshape(s.batch(), 1, 1, rows, 1);
            INDArray kd = keyDocs.get(NDArrayIndex.all(), NDArrayIndex.interval(k0, k0 + cols))
                    .reshape(s.batch(), 1, 1, 1, cols);
            tile.addi(bias(qd.sub(kd).eq(0)));                       // same document
            tile.addi(bias(qd.gte(0)));                               // a padded query sees nothing
            tile.addi(bias(kd.gte(0)));                               // and no query sees a padded key
        }
    }

    /** 0 where {@code allowed}, -inf elsewhere, in the data type. */
    private INDArray bias(INDArray allowed) {
        return Transforms.log(allowed.castTo(type), false);
    }

    /** The combined kind of a tile over the batch: skipped only if no sequence needs it, full only if all see all. */
    private TilePlan.Kind kind(int qb, int kb) {
        boolean any = false;
        boolean all = true;
        for (int b = 0; b < s.batch(); b++) {
            TilePlan.Kind k = plan.kind(b, qb, kb);
            any |= k != TilePlan.Kind.SKIP;
            all &= k == TilePlan.Kind.FULL;
        }
        return !any ? TilePlan.Kind.SKIP : all ? TilePlan.Kind.FULL : TilePlan.Kind.PARTIAL;
    }

    /** Rows {@code [from, from + n)} (third dimension) of a {@code [B, H, N, D]} array: a view. */
    private static INDArray rows(INDArray a, long from, long n) {
        INDArrayIndex[] idx = {NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(from, from + n),
            NDArrayIndex.all()};
        return a.get(idx);
    }

    /** Rows of a query-shaped array {@code [B, H, N, X]} as {@code [B, Hkv, G n, X]}, copied. */
    private INDArray grouped(INDArray a, long from, int n) {
        return rows(a, from, n).dup('c').reshape('c', s.batch(), s.kvHeads(), (long) s.group() * n, a.size(3));
    }

    /** A copy with -inf and +inf replaced by 0. */
    private static INDArray finite(INDArray a) {
        INDArray c = a.dup();
        BooleanIndexing.replaceWhere(c, 0.0, Conditions.isInfinite());
        return c;
    }
}
