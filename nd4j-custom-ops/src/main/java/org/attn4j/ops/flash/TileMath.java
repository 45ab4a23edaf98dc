package org.attn4j.ops.flash;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The element-wise work on one score tile, between the gemms: the online-softmax step of the forward
 * pass and the two row-shifted element-wise steps of the backward pass. Three implementations: native
 * AVX-512 code for FLOAT where its library loads ({@link NativeTileMath}), fused passes per row with the JDK
 * Vector API (FLOAT and DOUBLE, when {@code jdk.incubator.vector} is in the boot layer), and a fallback made of
 * ND4J ops (any type). The choice is made once, in {@link #forType}.
 *
 * <p>Tiles are dedicated, offset-free {@code rows x cols} C-order buffers; row shifts are read from
 * consecutive elements of a plain array.
 */
interface TileMath {

    /**
     * One online-softmax step (FlashAttention-2 algorithm 1, lines 8-10) in the base of {@link #base()}: sets
     * the row shift {@code m} (at least the row maximum minus a small margin, see the implementation),
     * {@code alpha = base^(m_old - m)}, overwrites the tile with {@code base^(s - m)} and returns its row sums
     * in {@code rowSum}. Rows that have seen no key yet keep {@code m = -inf} and produce zeros, not NaN.
     *
     * @return whether any {@code alpha != 1} (the accumulator needs rescaling)
     */
    boolean softmaxStep(INDArray scores, int rows, int cols, double[] m, double[] alpha, double[] rowSum);

    /**
     * The base of {@link #softmaxStep}'s powers, e or 2: the forward pass gives it scores multiplied by
     * {@code 1 / ln(base)} ({@code log2(e)} for base 2), so that {@code base^s'} is {@code e^s}.
     */
    default double base() {
        return Math.E;
    }

    /** {@code p[r][c] = exp(p[r][c] + shift[r])}, {@code shift[r]} the element {@code at + r} of {@code shifts}. */
    void expShifted(INDArray p, INDArray shifts, long at, int rows, int cols);

    /** {@code dp[r][c] = p[r][c] * (dp[r][c] + shift[r])}, {@code shift[r]} as in {@link #expShifted}. */
    void shiftedProduct(INDArray dp, INDArray p, INDArray shifts, long at, int rows, int cols);

    /** Sets the entries of a partial tile that its mask hides to negative infinity. */
    default void mask(INDArray tile, TilePlan plan, int b, int qb, int kb) {
        mask(tile, plan, b, plan.queryStart(qb), plan.queryRows(qb), kb, 0, plan.keyCols(kb));
    }

    /**
     * {@link #mask(INDArray, TilePlan, int, int, int)} for a {@code rows x cols} part of a tile: local queries
     * {@code q0 ...}, columns {@code c0 ...} of key block {@code kb}.
     */
    void mask(INDArray tile, TilePlan plan, int b, int q0, int rows, int kb, int c0, int cols);

    /** {@code m[r][c] *= factors[r]}. */
    default void scaleRows(INDArray m, double[] factors, int rows, int cols) {
        scaleRows(m, 0, factors, rows, cols);
    }

    /** {@code m[row0 + r][c] *= factors[r]} for {@code r < rows}. */
    void scaleRows(INDArray m, int row0, double[] factors, int rows, int cols);

    /**
     * The implementation {@link TilePath#cpuKernel()} names for {@code type}: the fastest one available, unless
     * {@code -Dattn4j.noVector=true} forces ND4J's or {@code -Dattn4j.nativeTiles=false} the Java ones (to test or
     * compare those paths).
     */
    static TileMath forType(DataType type) {
        TilePath path = TilePath.cpuKernel();
        if (type == DataType.FLOAT && path.nativeInUse()) {
            return new NativeTileMath(path.vectorInUse() ? VectorTileMath.create() : new Nd4jTileMath());
        }
        if (path.vectorInUse()) {
            return type == DataType.FLOAT ? VectorTileMath.create()
                    : type == DataType.DOUBLE ? VectorTileMath.createDouble() : new Nd4jTileMath();
        }
        return new Nd4jTileMath();
    }
}
