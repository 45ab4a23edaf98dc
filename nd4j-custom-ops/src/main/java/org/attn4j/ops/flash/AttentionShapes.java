package org.attn4j.ops.flash;

import java.util.Arrays;

import org.attn4j.ops.Documents;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The validated sizes of one attention call: q {@code [B, H, Nq, D]}, k and v {@code [B, Hkv, Nk, D]}.
 * All checks of the op's inputs happen here, once, before any kernel runs; a failure is an
 * {@link IllegalArgumentException} naming the op, the expected and the actual value.
 *
 * @param batch     B
 * @param heads     H, the query heads
 * @param kvHeads   Hkv, the key/value heads; {@code H % Hkv == 0} (GQA / MQA)
 * @param queries   Nq, the local query length
 * @param keys      Nk, the local key length
 * @param headDim   D
 * @param dataType  FLOAT or DOUBLE, shared by every input
 */
public record AttentionShapes(int batch, int heads, int kvHeads, int queries, int keys, int headDim,
                              DataType dataType) {

    /** Query heads that share one key/value head. */
    public int group() {
        return heads / kvHeads;
    }

    /**
     * Checks q, k, v and the mask against each other.
     *
     * @param op name used in messages
     * @throws IllegalArgumentException on any rank, shape, type, head or mask mismatch
     */
    public static AttentionShapes of(String op, INDArray q, INDArray k, INDArray v, AttentionMask mask) {
        requireNonNull(op, "q", q);
        requireNonNull(op, "k", k);
        requireNonNull(op, "v", v);
        requireRank4(op, "q", q);
        requireRank4(op, "k", k);
        requireRank4(op, "v", v);
        DataType t = q.dataType();
        if (t != DataType.FLOAT && t != DataType.DOUBLE) {
            throw new IllegalArgumentException(op + ": q must be FLOAT or DOUBLE, got " + t);
        }
        if (k.dataType() != t || v.dataType() != t) {
            throw new IllegalArgumentException(op + ": q, k, v must share one data type, got q " + t + ", k "
                    + k.dataType() + ", v " + v.dataType());
        }
        if (!Arrays.equals(k.shape(), v.shape())) {
            throw new IllegalArgumentException(op + ": k and v must have the same shape [B, Hkv, Nk, D], got k "
                    + Arrays.toString(k.shape()) + ", v " + Arrays.toString(v.shape()));
        }
        if (k.size(0) != q.size(0)) {
            throw new IllegalArgumentException(op + ": k has batch size " + k.size(0) + ", q has " + q.size(0));
        }
        if (k.size(3) != q.size(3)) {
            throw new IllegalArgumentException(op + ": k has head dimension D=" + k.size(3) + ", q has D="
                    + q.size(3) + "; they must be equal");
        }
        long h = q.size(1);
        long hkv = k.size(1);
        if (hkv == 0 || h % hkv != 0) {
            throw new IllegalArgumentException(op + ": k has " + hkv + " heads, q has " + h
                    + "; q heads must be a multiple of k heads");
        }
        if (q.size(2) == 0 || k.size(2) == 0) {
            throw new IllegalArgumentException(op + ": empty sequence: q has " + q.size(2) + " positions, k has "
                    + k.size(2) + "; both need at least 1");
        }
        if (q.size(0) == 0 || q.size(3) == 0 || h == 0) {
            throw new IllegalArgumentException(op + ": q has an empty dimension " + Arrays.toString(q.shape()));
        }
        for (long s : new long[] {q.size(0), h, q.size(2), k.size(2), q.size(3)}) {
            if (s > Integer.MAX_VALUE) {
                throw new IllegalArgumentException(op + ": dimension " + s + " exceeds " + Integer.MAX_VALUE);
            }
        }
        AttentionShapes shapes = new AttentionShapes((int) q.size(0), (int) h, (int) hkv, (int) q.size(2),
                (int) k.size(2), (int) q.size(3), t);
        shapes.checkMask(op, mask);
        return shapes;
    }

    /** Checks that {@code a} has exactly {@code shape} and this call's data type. */
    public void requireShape(String op, String name, INDArray a, long... shape) {
        requireNonNull(op, name, a);
        if (!Arrays.equals(a.shape(), shape)) {
            throw new IllegalArgumentException(op + ": " + name + " must have shape " + Arrays.toString(shape)
                    + ", got " + Arrays.toString(a.shape()));
        }
        if (a.dataType() != dataType) {
            throw new IllegalArgumentException(op + ": " + name + " must be " + dataType + " like q, got "
                    + a.dataType());
        }
    }

    private void checkMask(String op, AttentionMask mask) {
        if (mask == null) {
            throw new IllegalArgumentException(op + ": mask is null; pass AttentionMask.none() for full attention");
        }
        int[] qp = mask.queryPositions();
        if (qp != null && qp.length != queries) {
            throw new IllegalArgumentException(op + ": " + qp.length + " query positions for " + queries
                    + " queries; expected one position per query");
        }
        int[] kp = mask.keyPositions();
        if (kp != null && kp.length != keys) {
            throw new IllegalArgumentException(op + ": " + kp.length + " key positions for " + keys
                    + " keys; expected one position per key");
        }
        INDArray pad = mask.keyPadding();
        if (pad != null && (pad.size(0) != batch || pad.size(1) != keys)) {
            throw new IllegalArgumentException(op + ": key padding must have shape [" + batch + ", " + keys
                    + "] (batch, keys), got " + Arrays.toString(pad.shape()));
        }
        Documents docs = mask.documents();
        if (docs != null) {
            if (docs.batch() != batch) {
                throw new IllegalArgumentException(op + ": document ids cover " + docs.batch() + " sequences, q has "
                        + batch + "; expected [" + batch + ", N] ids");
            }
            if (qp == null && kp == null && docs.length() != Math.max(queries, keys)) {
                throw new IllegalArgumentException(op + ": document ids must have shape [" + batch + ", "
                        + Math.max(queries, keys) + "] (batch, positions), got [" + docs.batch() + ", "
                        + docs.length() + "]");
            }
            int most = Math.max(max(qp, queries), max(kp, keys));
            if (most >= docs.length()) {
                throw new IllegalArgumentException(op + ": document ids cover global positions 0.." + (docs.length() - 1)
                        + ", the call holds position " + most + "; expected ids for the whole sequence");
            }
        }
    }

    private static int max(int[] positions, int n) {
        if (positions == null) {
            return n - 1;
        }
        int m = Integer.MIN_VALUE;
        for (int p : positions) {
            m = Math.max(m, p);
        }
        return m;
    }

    private static void requireNonNull(String op, String name, INDArray a) {
        if (a == null) {
            throw new IllegalArgumentException(op + ": " + name + " is null");
        }
    }

    private static void requireRank4(String op, String name, INDArray a) {
        if (a.rank() != 4) {
            throw new IllegalArgumentException(op + ": " + name + " must have rank 4 [B, H, N, D], got rank "
                    + a.rank() + " " + Arrays.toString(a.shape()));
        }
    }
}
