package org.attn4j.samples;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.attn4j.samples.io.Npy;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Seeded inputs for {@code attn4j check}, written as {@code .npy} files into a directory.
 *
 * @param q  queries [B, H, N, D]
 * @param k  keys [B, Hkv, N, D]
 * @param v  values [B, Hkv, N, D]
 * @param dO output gradient [B, H, N, D]
 */
public record CheckFixture(INDArray q, INDArray k, INDArray v, INDArray dO) {

    /** Random normal inputs of the given type and sizes, from {@code seed}. */
    public static CheckFixture random(DataType type, int b, int h, int hkv, int n, int d, long seed) {
        Nd4j.getRandom().setSeed(seed);
        return new CheckFixture(Nd4j.randn(type, b, h, n, d), Nd4j.randn(type, b, hkv, n, d),
                Nd4j.randn(type, b, hkv, n, d), Nd4j.randn(type, b, h, n, d));
    }

    /** Writes q.npy, k.npy, v.npy and do.npy into {@code dir} and returns {@code dir}. */
    public Path writeTo(Path dir) throws IOException {
        Files.createDirectories(dir);
        Npy.write(dir.resolve("q.npy"), q);
        Npy.write(dir.resolve("k.npy"), k);
        Npy.write(dir.resolve("v.npy"), v);
        Npy.write(dir.resolve("do.npy"), dO);
        return dir;
    }

    /** A version-1.0 .npy file with any descr and raw little-endian data, as numpy would write it. */
    public static void writeRaw(Path file, String descr, String shapeTuple, byte[] data) throws IOException {
        String dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shapeTuple + ", }";
        int pad = (64 - (10 + dict.length() + 1) % 64) % 64;
        String text = dict + " ".repeat(pad) + "\n";
        ByteBuffer b = ByteBuffer.allocate(10 + text.length() + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}).putShort((short) text.length());
        b.put(text.getBytes(StandardCharsets.US_ASCII)).put(data);
        Files.write(file, b.array());
    }
}
