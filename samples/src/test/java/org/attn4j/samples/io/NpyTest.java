package org.attn4j.samples.io;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** The .npy codec: exact round trips and the numpy variants ND4J's own reader gets wrong. */
class NpyTest {

    @TempDir
    Path tmp;

    @Test
    void roundTripsFloat32AndFloat64Exactly() throws IOException {
        Nd4j.getRandom().setSeed(7);
        for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE}) {
            for (long[] shape : new long[][] {{3}, {2, 5}, {2, 3, 4, 5}, {1, 1, 70000}}) {
                INDArray a = Nd4j.randn(type, shape);
                Path f = tmp.resolve("a.npy");
                Npy.write(f, a);
                INDArray b = Npy.read(f);
                assertEquals(type, b.dataType());
                assertArrayEquals(shape, b.shape());
                assertEquals(a, b, type + " " + java.util.Arrays.toString(shape));
                assertEquals(0, (Files.size(f) - a.length() * type.width()) % 64, "header not 64-byte aligned");
            }
        }
    }

    @Test
    void writesViewsInLogicalOrder() throws IOException {
        INDArray a = Nd4j.arange(12).castTo(DataType.FLOAT).reshape(3, 4);
        Npy.write(tmp.resolve("t.npy"), a.transpose());
        assertEquals(a.transpose(), Npy.read(tmp.resolve("t.npy")));
    }

    @Test
    void writesTheHeaderNumpyWrites() {
        String h = new String(Npy.header("<f4", new long[] {2, 3}), StandardCharsets.ISO_8859_1);
        assertTrue(h.startsWith("\u0093NUMPY\u0001\u0000"), h);
        assertTrue(h.contains("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), h);
        assertTrue(new String(Npy.header("<f8", new long[] {5}), StandardCharsets.ISO_8859_1).contains("(5,)"));
        assertEquals(0, Npy.header("<f4", new long[] {2, 3}).length % 64, "data must start 64-byte aligned");
    }

    @Test
    void readsFortranOrderAndBigEndianAsNumpyMeansThem() throws IOException {
        // numpy: np.arange(6.).reshape(2, 3) saved in Fortran order stores the columns: 0 3 1 4 2 5.
        ByteBuffer fortran = ByteBuffer.allocate(48).order(ByteOrder.LITTLE_ENDIAN);
        for (double v : new double[] {0, 3, 1, 4, 2, 5}) {
            fortran.putDouble(v);
        }
        write(tmp.resolve("f.npy"), "<f8", true, "(2, 3)", fortran.array());
        INDArray expected = Nd4j.arange(6).castTo(DataType.DOUBLE).reshape(2, 3);
        assertEquals(expected, Npy.read(tmp.resolve("f.npy")));

        ByteBuffer big = ByteBuffer.allocate(24).order(ByteOrder.BIG_ENDIAN);
        for (float v : new float[] {0, 1, 2, 3, 4, 5}) {
            big.putFloat(v);
        }
        write(tmp.resolve("b.npy"), ">f4", false, "(2, 3)", big.array());
        assertEquals(expected.castTo(DataType.FLOAT), Npy.read(tmp.resolve("b.npy")));
    }

    @Test
    void refusesOtherTypesAndShortFilesNamingTheFile() throws IOException {
        write(tmp.resolve("i.npy"), "<i4", false, "(2,)", new byte[8]);
        NpyFormatException e = assertThrows(NpyFormatException.class, () -> Npy.read(tmp.resolve("i.npy")));
        assertEquals("i.npy has dtype '<i4'; expected float32 ('<f4') or float64 ('<f8')", e.getMessage());

        write(tmp.resolve("s.npy"), "<f4", false, "(4,)", new byte[12]);
        e = assertThrows(NpyFormatException.class, () -> Npy.read(tmp.resolve("s.npy")));
        assertEquals("s.npy holds 12 data bytes; its header [4] <f4 needs 16", e.getMessage());
    }

    private static void write(Path file, String descr, boolean fortran, String shape, byte[] data)
            throws IOException {
        String dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False")
                + ", 'shape': " + shape + ", }";
        int pad = (64 - (10 + dict.length() + 1) % 64) % 64;
        byte[] text = (dict + " ".repeat(pad) + "\n").getBytes(StandardCharsets.US_ASCII);
        ByteBuffer b = ByteBuffer.allocate(10 + text.length + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}).putShort((short) text.length);
        Files.write(file, b.put(text).put(data).array());
    }
}
