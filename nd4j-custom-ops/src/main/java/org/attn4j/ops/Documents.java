package org.attn4j.ops;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Packed sequences: which document each global position of each sequence belongs to. Attention stays inside a
 * document: a query sees a key only if both carry the same id (and the mask's other rules allow the pair); linear
 * attention's state starts afresh at each document. A negative id marks padding: a padded query sees nothing
 * (output 0, log-sum-exp {@code -inf}, zero gradients) and no query sees a padded key.
 *
 * <p>A document is one run of positions: the same id in two separate runs of one sequence is refused, so "same id"
 * and "same run" agree and every document is the interval {@code [start, end)} of global positions that
 * {@link #start} and {@link #end} give. Ids are by <b>global</b> position, like the mask's other rules: every worker
 * of a sequence-parallel group holds the whole table (4 bytes per token, against the {@code 2 Hkv D} values of its
 * K/V) and looks up the ids of whatever positions it holds.
 *
 * <p>Immutable.
 */
public final class Documents {

    private final int[][] ids;
    private final int[][] starts;
    private final int[][] ends;

    private Documents(int[][] ids) {
        this.ids = ids;
        this.starts = new int[ids.length][];
        this.ends = new int[ids.length][];
        for (int b = 0; b < ids.length; b++) {
            int[] id = ids[b];
            int n = id.length;
            starts[b] = new int[n];
            ends[b] = new int[n];
            Map<Integer, Integer> seen = new HashMap<>();
            int p = 0;
            while (p < n) {
                int q = p;
                while (q < n && id[q] == id[p]) {
                    q++;
                }
                if (id[p] >= 0) {
                    Integer before = seen.put(id[p], p);
                    if (before != null) {
                        throw new IllegalArgumentException("Documents: document id " + id[p] + " of sequence " + b
                                + " appears in two separate runs (from position " + before + " and from " + p
                                + "); expected each document to be one run of positions");
                    }
                }
                for (int i = p; i < q; i++) {
                    starts[b][i] = id[p] >= 0 ? p : i;
                    ends[b][i] = id[p] >= 0 ? q : i;        // padding: the empty interval
                }
                p = q;
            }
        }
    }

    /**
     * Document ids {@code [B, N]} per global position, INT or LONG (negative = padding).
     *
     * @throws IllegalArgumentException if the array is not {@code [B, N]} integers or a document is split
     */
    public static Documents of(INDArray ids) {
        if (ids == null) {
            throw new IllegalArgumentException("Documents: ids are null; expected [B, N] integers");
        }
        if (ids.rank() != 2 || ids.size(0) == 0 || ids.size(1) == 0) {
            throw new IllegalArgumentException("Documents: expected ids of shape [B, N] (batch, positions), got "
                    + Arrays.toString(ids.shape()));
        }
        DataType t = ids.dataType();
        if (t != DataType.INT && t != DataType.LONG) {
            throw new IllegalArgumentException("Documents: expected INT or LONG ids (int32 or int64), got " + t);
        }
        if (ids.size(1) > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("Documents: " + ids.size(1) + " positions exceed " + Integer.MAX_VALUE);
        }
        int[][] table = new int[(int) ids.size(0)][];
        for (int b = 0; b < table.length; b++) {
            long[] row = ids.getRow(b).toLongVector();
            table[b] = new int[row.length];
            for (int i = 0; i < row.length; i++) {
                if (row[i] > Integer.MAX_VALUE || row[i] < Integer.MIN_VALUE) {
                    throw new IllegalArgumentException("Documents: id " + row[i] + " at [" + b + ", " + i
                            + "] does not fit in 32 bits");
                }
                table[b][i] = (int) row[i];
            }
        }
        return new Documents(table);
    }

    /** Document ids {@code [B][N]} per global position (negative = padding); copied. */
    public static Documents of(int[][] ids) {
        if (ids == null || ids.length == 0) {
            throw new IllegalArgumentException("Documents: expected ids of shape [B, N] with B >= 1, got none");
        }
        int n = ids[0].length;
        int[][] copy = new int[ids.length][];
        for (int b = 0; b < ids.length; b++) {
            if (ids[b].length != n || n == 0) {
                throw new IllegalArgumentException("Documents: every sequence needs the same number (>= 1) of ids; "
                        + "sequence 0 has " + n + ", sequence " + b + " has " + ids[b].length);
            }
            copy[b] = ids[b].clone();
        }
        return new Documents(copy);
    }

    /**
     * Documents of the given lengths packed one after another into every sequence of the batch, the rest padding:
     * ids {@code 0, 1, ...} in order.
     *
     * @param batch   B
     * @param length  N
     * @param lengths document lengths, summing to at most N
     */
    public static Documents packed(int batch, int length, int... lengths) {
        int[][] ids = new int[batch][length];
        for (int[] row : ids) {
            Arrays.fill(row, -1);
            int at = 0;
            for (int d = 0; d < lengths.length; d++) {
                if (lengths[d] < 1 || at + lengths[d] > length) {
                    throw new IllegalArgumentException("Documents: lengths " + Arrays.toString(lengths)
                            + " do not fit in " + length + " positions (each >= 1)");
                }
                Arrays.fill(row, at, at + lengths[d], d);
                at += lengths[d];
            }
        }
        return new Documents(ids);
    }

    /**
     * Seeded random packed sequences, for benchmarks and tests: per sequence, documents of 1..longest positions
     * (uniform) one after another, about one run in five padding; ids 0, 1, ... in order.
     */
    public static Documents random(long seed, int batch, int length, int longest) {
        Random r = new Random(seed);
        int[][] ids = new int[batch][length];
        for (int[] row : ids) {
            int at = 0;
            int id = 0;
            while (at < length) {
                int len = Math.min(length - at, 1 + r.nextInt(longest));
                Arrays.fill(row, at, at + len, r.nextInt(5) == 0 ? -1 : id++);
                at += len;
            }
        }
        return new Documents(ids);
    }

    /** B, the sequences. */
    public int batch() {
        return ids.length;
    }

    /** N, the global positions of each sequence. */
    public int length() {
        return ids[0].length;
    }

    /** The id at global position {@code p} of sequence {@code b} (negative = padding). */
    public int id(int b, int p) {
        return ids[b][p];
    }

    /** The first global position of the document holding position {@code p} ({@code p} itself for padding). */
    public int start(int b, int p) {
        return starts[b][p];
    }

    /** One past the last position of the document holding {@code p} ({@code p} for padding: nothing). */
    public int end(int b, int p) {
        return ends[b][p];
    }

    /** Whether position {@code p} of sequence {@code b} is padding. */
    public boolean isPadding(int b, int p) {
        return ids[b][p] < 0;
    }

    /** Whether a query at global position {@code i} may see a key at {@code j} by document (same id, not padding). */
    public boolean sameDocument(int b, int i, int j) {
        return ids[b][i] >= 0 && ids[b][i] == ids[b][j];
    }

    /** Whether position {@code p > 0} is in the same document as position {@code p - 1} (both real tokens). */
    public boolean continues(int b, int p) {
        return p > 0 && sameDocument(b, p, p - 1);
    }

    /** The ids of sequence {@code b}; a copy. */
    public int[] ids(int b) {
        return ids[b].clone();
    }

    /** A digest of the ids, equal for equal tables: workers compare it to find a worker with other ids. */
    public long fingerprint() {
        long h = 1125899906842597L;
        for (int[] row : ids) {
            for (int x : row) {
                h = 31 * h + x;
            }
            h = 31 * h + row.length;
        }
        return h;
    }

    /**
     * Checks that this table covers {@code batch} sequences of {@code length} global positions.
     *
     * @param who name used in the message
     */
    public void requireSize(String who, long batch, long length) {
        if (ids.length != batch || ids[0].length != length) {
            throw new IllegalArgumentException(who + ": document ids must have shape [" + batch + ", " + length
                    + "] (batch, global positions), got [" + ids.length + ", " + ids[0].length + "]");
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Documents d && Arrays.deepEquals(ids, d.ids);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(fingerprint());
    }

    @Override
    public String toString() {
        return "Documents[" + ids.length + ", " + ids[0].length + "]";
    }
}
