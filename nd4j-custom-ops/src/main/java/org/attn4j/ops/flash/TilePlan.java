package org.attn4j.ops.flash;

import java.util.Arrays;

import org.attn4j.ops.Documents;
import org.attn4j.ops.Views;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The mask of one call cut into tiles: which (query block, key block) tiles are fully masked (skipped),
 * fully visible (no mask work) or partial (an additive 0 / -inf bias built from the exact per-pair rule).
 * Decided from the min/max global position of each block, so any layout (contiguous, zigzag, striped,
 * cyclic) works: unsorted positions only make more tiles partial, never a wrong answer. With documents, a tile
 * is skipped when the documents of its queries end before or start after its keys, and fully visible when all its
 * queries and keys lie in one document; documents are runs of positions, so a query's visible keys stay an
 * interval of positions and partial tiles are masked by runs of columns like the positional rules.
 */
final class TilePlan {

    enum Kind { SKIP, FULL, PARTIAL }

    private final AttentionMask mask;
    private final int queryBlock;
    private final int keyBlock;
    private final int[] qPos;
    private final int[] kPos;
    private final Kind[] positional;          // [qBlocks * kBlocks]
    private final boolean[][] keyValid;        // [B][Nk], null without padding
    private final Kind[] padding;              // [B * kBlocks]: FULL = all real, SKIP = all padded
    private final boolean[] keysAscend;        // [kBlocks]: positions strictly increase within the block
    private final int[][] keyRange;            // [kBlocks]: {min, max} key position
    private final Documents docs;              // null without documents
    private final int[][] queryDocs;           // [B][qBlocks * 3]: {least start, greatest end, 1 if one document}
    final int queryBlocks;
    final int keyBlocks;
    final int queries;
    final int keys;

    TilePlan(AttentionMask mask, AttentionShapes s, int queryBlock, int keyBlock) {
        this.mask = mask;
        this.queryBlock = queryBlock;
        this.keyBlock = keyBlock;
        this.queries = s.queries();
        this.keys = s.keys();
        this.qPos = mask.queryPositionsOrDefault(queries);
        this.kPos = mask.keyPositionsOrDefault(keys);
        this.queryBlocks = (queries + queryBlock - 1) / queryBlock;
        this.keyBlocks = (keys + keyBlock - 1) / keyBlock;
        this.positional = new Kind[queryBlocks * keyBlocks];
        this.keysAscend = new boolean[keyBlocks];
        this.keyRange = new int[keyBlocks][];
        for (int kb = 0; kb < keyBlocks; kb++) {
            boolean ascend = true;
            for (int j = kb * keyBlock + 1; j < kb * keyBlock + keyCols(kb); j++) {
                ascend &= kPos[j] > kPos[j - 1];
            }
            keysAscend[kb] = ascend;
        }
        for (int qb = 0; qb < queryBlocks; qb++) {
            int[] qr = range(qPos, qb * queryBlock, queryRows(qb));
            for (int kb = 0; kb < keyBlocks; kb++) {
                keyRange[kb] = range(kPos, kb * keyBlock, keyCols(kb));
                positional[qb * keyBlocks + kb] = classify(qr[0], qr[1], keyRange[kb][0], keyRange[kb][1]);
            }
        }
        this.docs = mask.documents();
        this.queryDocs = docs == null ? null : queryDocuments(s.batch());
        INDArray pad = mask.keyPadding();
        if (pad == null) {
            keyValid = null;
            padding = null;
        } else {
            keyValid = new boolean[s.batch()][keys];
            padding = new Kind[s.batch() * keyBlocks];
            // One bulk read of the [B, Nk] padding mask (element reads cost a call each, and a device sync off the CPU).
            double[][] valid = pad.reshape(s.batch(), keys).toDoubleMatrix();
            for (int b = 0; b < s.batch(); b++) {
                for (int j = 0; j < keys; j++) {
                    keyValid[b][j] = valid[b][j] != 0.0;
                }
                for (int kb = 0; kb < keyBlocks; kb++) {
                    int seen = 0;
                    int n = keyCols(kb);
                    for (int j = kb * keyBlock; j < kb * keyBlock + n; j++) {
                        seen += keyValid[b][j] ? 1 : 0;
                    }
                    padding[b * keyBlocks + kb] = seen == n ? Kind.FULL : seen == 0 ? Kind.SKIP : Kind.PARTIAL;
                }
            }
        }
    }

    int queryRows(int qb) {
        return Math.min(queryBlock, queries - qb * queryBlock);
    }

    int keyCols(int kb) {
        return Math.min(keyBlock, keys - kb * keyBlock);
    }

    int queryStart(int qb) {
        return qb * queryBlock;
    }

    int keyStart(int kb) {
        return kb * keyBlock;
    }

    Kind kind(int b, int qb, int kb) {
        Kind p = positional[qb * keyBlocks + kb];
        if (docs != null && p != Kind.SKIP) {
            Kind d = documentKind(b, qb, kb);
            p = d == Kind.SKIP ? d : d == Kind.PARTIAL ? d : p;
        }
        if (padding == null || p == Kind.SKIP) {
            return p;
        }
        Kind k = padding[b * keyBlocks + kb];
        if (k == Kind.SKIP) {
            return Kind.SKIP;
        }
        return p == Kind.FULL && k == Kind.FULL ? Kind.FULL : Kind.PARTIAL;
    }

    /** Whether local query {@code i} of sequence {@code b} may see local key {@code j}. */
    boolean allowed(int b, int i, int j) {
        return mask.allows(qPos[i], kPos[j]) && (keyValid == null || keyValid[b][j])
                && (docs == null || docs.sameDocument(b, qPos[i], kPos[j]));
    }

    /**
     * Per query block of every sequence: the least start and greatest end of its queries' documents (padding left
     * out; {@code start > end} when all of them are padding), and whether all its queries lie in one document.
     */
    private int[][] queryDocuments(int batch) {
        int[][] t = new int[batch][queryBlocks * 3];
        for (int b = 0; b < batch; b++) {
            for (int qb = 0; qb < queryBlocks; qb++) {
                int least = Integer.MAX_VALUE;
                int most = Integer.MIN_VALUE;
                boolean one = true;
                int first = qPos[qb * queryBlock];
                for (int i = qb * queryBlock; i < qb * queryBlock + queryRows(qb); i++) {
                    int p = qPos[i];
                    one &= !docs.isPadding(b, p) && docs.start(b, p) == docs.start(b, first);
                    if (!docs.isPadding(b, p)) {
                        least = Math.min(least, docs.start(b, p));
                        most = Math.max(most, docs.end(b, p));
                    }
                }
                t[b][qb * 3] = least;
                t[b][qb * 3 + 1] = most;
                t[b][qb * 3 + 2] = one ? 1 : 0;
            }
        }
        return t;
    }

    /** The tile by documents alone: no key inside its queries' documents, all of them inside one, or neither. */
    private Kind documentKind(int b, int qb, int kb) {
        int least = queryDocs[b][qb * 3];
        int most = queryDocs[b][qb * 3 + 1];
        int[] kr = keyRange[kb];
        if (least > most || kr[1] < least || kr[0] >= most) {
            return Kind.SKIP;
        }
        boolean one = queryDocs[b][qb * 3 + 2] == 1;
        return one && kr[0] >= least && kr[1] < most ? Kind.FULL : Kind.PARTIAL;
    }

    /**
     * Whether {@link #allowedFrom} and {@link #allowedTo} describe the positional rules of key block {@code kb}:
     * its key positions strictly increase, so the keys a query may see form one run of columns.
     */
    boolean keysAscend(int kb) {
        return keysAscend[kb];
    }

    /**
     * The first column of key block {@code kb} that local query {@code i} of sequence {@code b} may see by position
     * and document (keys ascending).
     */
    int allowedFrom(int b, int i, int kb) {
        long w = mask.window();
        long least = w > 0 ? (long) qPos[i] - w + 1 : Long.MIN_VALUE;
        if (docs != null) {
            least = Math.max(least, docs.start(b, qPos[i]));
        }
        return firstAtLeast(kb, least);
    }

    /** One past the last column of key block {@code kb} that local query {@code i} of sequence {@code b} may see. */
    int allowedTo(int b, int i, int kb) {
        long w = mask.window();
        long most = mask.isCausal() ? qPos[i] : w > 0 ? (long) qPos[i] + w - 1 : Long.MAX_VALUE;
        if (docs != null) {
            most = Math.min(most, docs.end(b, qPos[i]) - 1L);
        }
        return most == Long.MAX_VALUE ? keyCols(kb) : firstAtLeast(kb, most + 1);
    }

    /** Receives runs of hidden columns from {@link #hiddenRuns}. */
    interface HiddenRun {
        /** Columns {@code [from, to)} of local row {@code row} are hidden. */
        void hide(int row, int from, int to);
    }

    /**
     * Reports what the mask hides in a {@code rows x cols} part of a tile of sequence {@code b}: local queries
     * {@code q0 ...}, columns {@code c0 ...} of key block {@code kb} (rows and columns counted from the part). When
     * the block's keys ascend, a row's visible keys form one run, so what lies outside it is reported as two runs,
     * plus padded keys column by column; otherwise every hidden entry is reported on its own.
     */
    void hiddenRuns(int b, int q0, int rows, int kb, int c0, int cols, HiddenRun out) {
        int k0 = keyStart(kb) + c0;
        if (!keysAscend(kb)) {
            for (int r = 0; r < rows; r++) {
                for (int c = 0; c < cols; c++) {
                    if (!allowed(b, q0 + r, k0 + c)) {
                        out.hide(r, c, c + 1);
                    }
                }
            }
            return;
        }
        for (int r = 0; r < rows; r++) {
            int from = visibleFrom(b, q0 + r, kb, c0, cols);
            out.hide(r, 0, from);
            out.hide(r, visibleTo(b, q0 + r, kb, c0, cols, from), cols);
        }
        if (partlyPadded(b, kb)) {
            for (int c = 0; c < cols; c++) {
                if (!keyValid(b, k0 + c)) {
                    for (int r = 0; r < rows; r++) {
                        out.hide(r, c, c + 1);
                    }
                }
            }
        }
    }

    /**
     * The first column, counted from column {@code c0} of key block {@code kb} in a part {@code cols} wide, that local
     * query {@code i} of sequence {@code b} may see by position and document (keys ascending), within {@code [0, cols]}.
     */
    int visibleFrom(int b, int i, int kb, int c0, int cols) {
        return Math.min(cols, Math.max(0, allowedFrom(b, i, kb) - c0));
    }

    /** One past the last such column, within {@code [from, cols]} ({@code from} from {@link #visibleFrom}). */
    int visibleTo(int b, int i, int kb, int c0, int cols, int from) {
        return Math.min(cols, Math.max(from, allowedTo(b, i, kb) - c0));
    }

    /** Whether key padding hides some keys of block {@code kb} in sequence {@code b} (not all of them). */
    boolean partlyPadded(int b, int kb) {
        return padding != null && padding[b * keyBlocks + kb] == Kind.PARTIAL;
    }

    /** Whether local key {@code j} of sequence {@code b} is a real token (not padding). */
    boolean keyValid(int b, int j) {
        return keyValid == null || keyValid[b][j];
    }

    /** The first column of key block {@code kb} whose position is at least {@code pos} (ascending positions). */
    private int firstAtLeast(int kb, long pos) {
        int lo = 0;
        int hi = keyCols(kb);
        int k0 = keyStart(kb);
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (kPos[k0 + mid] < pos) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /**
     * The additive bias of a {@code rows x cols} part of a tile (local queries {@code q0 ...}, local keys
     * {@code k0 ...}): 0 where the pair is allowed, negative infinity where not.
     */
    INDArray bias(int b, int q0, int rows, int k0, int cols, DataType type) {
        double[] v = new double[rows * cols];
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                v[r * cols + c] = allowed(b, q0 + r, k0 + c) ? 0.0 : Double.NEGATIVE_INFINITY;
            }
        }
        INDArray bias = Nd4j.create(type, rows, cols);
        Views.put(bias, v, v.length);
        return bias;
    }

    private Kind classify(int qMin, int qMax, int kMin, int kMax) {
        boolean causal = mask.isCausal();
        long w = mask.window();
        // Fully masked: no pair in the tile can pass.
        if (causal && kMin > qMax) {
            return Kind.SKIP;
        }
        if (w > 0 && ((long) qMin - kMax >= w || (!causal && (long) kMin - qMax >= w))) {
            return Kind.SKIP;
        }
        // Fully visible: every pair passes.
        boolean causalOk = !causal || kMax <= qMin;
        boolean windowOk = w == 0 || ((long) qMax - kMin < w && (causal || (long) kMax - qMin < w));
        return causalOk && windowOk ? Kind.FULL : Kind.PARTIAL;
    }

    private static int[] range(int[] pos, int start, int n) {
        int min = Integer.MAX_VALUE;
        int max = Integer.MIN_VALUE;
        for (int i = start; i < start + n; i++) {
            min = Math.min(min, pos[i]);
            max = Math.max(max, pos[i]);
        }
        return new int[] {min, max};
    }

    @Override
    public String toString() {
        return "TilePlan" + Arrays.toString(positional);
    }
}
