package org.attn4j.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** {@link Gemm} on blocks at offsets inside flat buffers, against ND4J's mmul on copies of the same blocks. */
class GemmTest {

    @ParameterizedTest
    @CsvSource({"FLOAT,false,false", "FLOAT,true,false", "FLOAT,false,true", "FLOAT,true,true",
        "DOUBLE,false,false", "DOUBLE,true,false", "DOUBLE,false,true", "DOUBLE,true,true"})
    void blocksAtOffsetsMatchMmul(DataType type, boolean ta, boolean tb) {
        int m = 5;
        int n = 7;
        int k = 3;
        long aOff = 11;
        long bOff = 4;
        long cOff = 9;
        INDArray a = Nd4j.getRandomFactory().getNewRandomInstance(1).nextGaussian(new long[] {40}).castTo(type);
        INDArray b = Nd4j.getRandomFactory().getNewRandomInstance(2).nextGaussian(new long[] {40}).castTo(type);
        INDArray c = Nd4j.getRandomFactory().getNewRandomInstance(3).nextGaussian(new long[] {60}).castTo(type);
        INDArray aBlock = block(a, aOff, ta ? k : m, ta ? m : k);
        INDArray bBlock = block(b, bOff, tb ? n : k, tb ? k : n);
        INDArray cBefore = block(c, cOff, m, n);
        INDArray expected = (ta ? aBlock.transpose() : aBlock).mmul(tb ? bBlock.transpose() : bBlock).muli(0.5)
                .addi(cBefore.mul(2.0));
        INDArray untouched = c.dup();

        Gemm.mul(a, aOff, ta, b, bOff, tb, c, cOff, m, n, k, 0.5, 2.0);

        INDArray got = block(c, cOff, m, n);
        double tol = type == DataType.DOUBLE ? 1e-12 : 1e-5;
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < n; j++) {
                assertEquals(expected.getDouble(i, j), got.getDouble(i, j), tol, "C[" + i + "," + j + "]");
            }
        }
        for (long e = 0; e < c.length(); e++) {
            if (e < cOff || e >= cOff + (long) m * n) {
                assertEquals(untouched.getDouble(e), c.getDouble(e), 0.0, "element " + e + " outside the block");
            }
        }
    }

    @Test
    void refusesMixedTypes() {
        INDArray f = Nd4j.create(DataType.FLOAT, 2, 2);
        INDArray d = Nd4j.create(DataType.DOUBLE, 2, 2);
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> Gemm.mul(f, 0, false, d, 0, false, f, 0, 2, 2, 2, 1.0, 0.0));
        assertTrue(e.getMessage().contains("expected offset-free arrays of one type"), e.getMessage());
    }

    @Test
    void refusesABlockPastTheBuffer() {
        INDArray x = Nd4j.create(DataType.FLOAT, 4, 4);
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> Gemm.mul(x, 0, false, x, 0, false, x, 8, 3, 3, 3, 1.0, 0.0));
        assertTrue(e.getMessage().contains("block C of 9 elements at offset 8 does not fit its buffer of 16"),
                e.getMessage());
    }

    /** A copy of the rows x cols row-major block at offset. */
    private static INDArray block(INDArray flat, long offset, int rows, int cols) {
        INDArray out = Nd4j.create(flat.dataType(), rows, cols);
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
                out.putScalar(i, j, flat.getDouble(offset + (long) i * cols + j));
            }
        }
        return out;
    }
}
