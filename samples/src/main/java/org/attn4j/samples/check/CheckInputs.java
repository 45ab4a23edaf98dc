package org.attn4j.samples.check;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.io.Npy;
import org.attn4j.samples.io.NpyFormatException;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.impl.reduce.longer.MatchCondition;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.conditions.Conditions;

/**
 * Loads and validates the inputs of {@code attn4j check}: {@code q.npy [B,H,N,D]}, {@code k.npy} and
 * {@code v.npy [B,Hkv,N,D]}, {@code do.npy [B,H,N,D]}, all float32 or all float64, finite; and, when present,
 * {@code segments.npy [B,N]}, int32 or int64, the document of every position (packed sequences; negative =
 * padding; each document one run of positions).
 *
 * <p>Every rule is checked here, once, with a message naming the file, what was expected and what came,
 * so the algorithms below get only inputs they can take (STYLE.md: policy in one place).
 */
public final class CheckInputs {

    /** File names, in the order they are reported. */
    public static final String Q = "q.npy";
    /** Keys file. */
    public static final String K = "k.npy";
    /** Values file. */
    public static final String V = "v.npy";
    /** Output-gradient file. */
    public static final String DO = "do.npy";
    /** Optional document ids file. */
    public static final String SEGMENTS = "segments.npy";

    private static final String EXPECTED = "expected q.npy [B,H,N,D], k.npy and v.npy [B,Hkv,N,D], "
            + "do.npy [B,H,N,D]";

    private CheckInputs() {
    }

    /**
     * Loads the four arrays from {@code dir} and checks them.
     *
     * @param dir   directory holding the four files
     * @param mask  the mask to attach
     * @param scale the score scale, or {@code null} for {@code 1/sqrt(D)}
     * @param decay the linear-attention decay rate (1 = none)
     * @throws UserInputException on any violated rule, naming the file
     * @throws IOException        on a read error other than a missing or malformed file
     */
    public static CheckProblem load(Path dir, AttentionMask mask, Double scale, double decay) throws IOException {
        if (!Files.isDirectory(dir)) {
            throw new UserInputException("input directory " + dir + " does not exist (" + EXPECTED + ")");
        }
        for (String name : new String[] {Q, K, V, DO}) {
            if (!Files.isRegularFile(dir.resolve(name))) {
                throw new UserInputException("missing input " + dir.resolve(name) + " (" + EXPECTED + ")");
            }
        }
        INDArray q = read(dir, Q);
        INDArray k = read(dir, K);
        INDArray v = read(dir, V);
        INDArray dO = read(dir, DO);
        checkTypes(q, k, v, dO);
        checkRank(Q, q, "[B, H, N, D]");
        checkRank(K, k, "[B, Hkv, N, D]");
        checkRank(V, v, "[B, Hkv, N, D]");
        checkRank(DO, dO, "[B, H, N, D]");
        checkShapes(q, k, v, dO);
        checkFinite(Q, q);
        checkFinite(K, k);
        checkFinite(V, v);
        checkFinite(DO, dO);
        double s = FlashAttention.resolveScale(scale, q.size(3));
        Documents docs = Files.exists(dir.resolve(SEGMENTS)) ? documents(dir, q.size(0), q.size(2)) : null;
        return new CheckProblem(q, k, v, dO, mask.withDocuments(docs), s, decay);
    }

    /** {@code segments.npy}: {@code [B, N]} int32 or int64 like q's B and N, each document one run. */
    private static Documents documents(Path dir, long batch, long length) throws IOException {
        INDArray ids;
        try {
            ids = Npy.readIntegers(dir.resolve(SEGMENTS));
        } catch (NpyFormatException e) {
            throw new UserInputException(e.getMessage(), e);
        }
        if (ids.rank() != 2 || ids.size(0) != batch || ids.size(1) != length) {
            throw new UserInputException(SEGMENTS + " has shape " + Arrays.toString(ids.shape()) + "; expected ["
                    + batch + ", " + length + "] (B and N of " + Q + "), the document id of every position");
        }
        try {
            return Documents.of(ids);
        } catch (IllegalArgumentException e) {
            throw new UserInputException(SEGMENTS + ": " + e.getMessage(), e);
        }
    }

    private static INDArray read(Path dir, String name) throws IOException {
        try {
            return Npy.read(dir.resolve(name));
        } catch (NoSuchFileException e) {
            throw new UserInputException("missing input " + dir.resolve(name) + " (" + EXPECTED + ")", e);
        } catch (NpyFormatException e) {
            throw new UserInputException(e.getMessage(), e);
        }
    }

    private static void checkTypes(INDArray q, INDArray k, INDArray v, INDArray dO) {
        String[] names = {K, V, DO};
        INDArray[] arrays = {k, v, dO};
        for (int i = 0; i < arrays.length; i++) {
            if (arrays[i].dataType() != q.dataType()) {
                throw new UserInputException(names[i] + " is " + typeName(arrays[i].dataType()) + " but " + Q
                        + " is " + typeName(q.dataType()) + "; all inputs must have the same type");
            }
        }
    }

    private static void checkRank(String name, INDArray a, String expected) {
        if (a.rank() != 4) {
            throw new UserInputException(name + " has shape " + Arrays.toString(a.shape()) + " (rank " + a.rank()
                    + "); expected rank 4 " + expected);
        }
        if (a.size(2) == 0) {
            throw new UserInputException(name + " has sequence length N = 0 (shape " + Arrays.toString(a.shape())
                    + "); expected N >= 1");
        }
        if (a.length() == 0) {
            throw new UserInputException(name + " has an empty dimension (shape " + Arrays.toString(a.shape())
                    + "); expected every dimension of " + expected + " >= 1");
        }
    }

    private static void checkShapes(INDArray q, INDArray k, INDArray v, INDArray dO) {
        if (!Arrays.equals(k.shape(), v.shape())) {
            throw new UserInputException(V + " has shape " + Arrays.toString(v.shape()) + " but " + K + " has "
                    + Arrays.toString(k.shape()) + "; k and v must have the same shape");
        }
        if (!Arrays.equals(q.shape(), dO.shape())) {
            throw new UserInputException(DO + " has shape " + Arrays.toString(dO.shape()) + " but " + Q + " has "
                    + Arrays.toString(q.shape()) + "; dO must have q's shape");
        }
        if (k.size(0) != q.size(0)) {
            throw new UserInputException(K + " has batch size B = " + k.size(0) + " but " + Q + " has B = "
                    + q.size(0));
        }
        if (k.size(2) != q.size(2)) {
            throw new UserInputException(K + " has sequence length N = " + k.size(2) + " but " + Q + " has N = "
                    + q.size(2) + "; q, k and v must have the same length");
        }
        if (k.size(3) != q.size(3)) {
            throw new UserInputException(K + " has head size D = " + k.size(3) + " but " + Q + " has D = "
                    + q.size(3));
        }
        if (q.size(1) % k.size(1) != 0) {
            throw new UserInputException(Q + " has " + q.size(1) + " heads, " + K + " has " + k.size(1)
                    + "; q heads must be a multiple of k heads");
        }
    }

    private static void checkFinite(String name, INDArray a) {
        long nan = count(a, true);
        long inf = count(a, false);
        if (nan > 0 || inf > 0) {
            String what = nan > 0 && inf > 0 ? nan + " NaN and " + inf + " infinite values"
                    : nan > 0 ? nan + " NaN value" + (nan == 1 ? "" : "s")
                    : inf + " infinite value" + (inf == 1 ? "" : "s");
            throw new UserInputException(name + " has " + what + "; inputs must be finite");
        }
    }

    private static long count(INDArray a, boolean nan) {
        MatchCondition op = new MatchCondition(a, nan ? Conditions.isNan() : Conditions.isInfinite());
        return Nd4j.getExecutioner().exec(op).getLong(0);
    }

    /** numpy's name of a FLOAT or DOUBLE type. */
    public static String typeName(DataType type) {
        return switch (type) {
            case FLOAT -> "float32";
            case DOUBLE -> "float64";
            default -> type.toString().toLowerCase(java.util.Locale.ROOT);
        };
    }
}
