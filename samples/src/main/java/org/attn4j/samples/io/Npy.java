package org.attn4j.samples.io;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Reads and writes NumPy {@code .npy} files of float32 and float64 arrays.
 *
 * <p>Our own codec rather than ND4J's {@code Nd4j.createFromNpyFile}: on ND4J 1.0.0-M2.1 that reader
 * ignores {@code fortran_order} (returns the elements in the wrong places), aborts the whole JVM on a
 * big-endian file (a native assertion), and reads a truncated file as garbage. This one reads format
 * versions 1 to 3, either byte order and either element order, checks the data length, and always
 * returns a C-order array; it writes version 1.0, little-endian, C order, as {@code numpy.save} does.
 */
public final class Npy {

    private static final byte[] MAGIC = {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y'};
    /** numpy pads the header so the data starts on a 64-byte boundary. */
    private static final int ALIGN = 64;
    private static final int CHUNK_ELEMENTS = 1 << 16;
    private static final Pattern DESCR = Pattern.compile("'descr'\\s*:\\s*'([^']*)'");
    private static final Pattern FORTRAN = Pattern.compile("'fortran_order'\\s*:\\s*(True|False)");
    private static final Pattern SHAPE = Pattern.compile("'shape'\\s*:\\s*\\(([^)]*)\\)");

    private Npy() {
    }

    /**
     * Reads a float32 or float64 array.
     *
     * @param file the {@code .npy} file
     * @return a C-order array of the file's type and shape
     * @throws NoSuchFileException if the file does not exist
     * @throws NpyFormatException  if the file is not a well-formed float32/float64 {@code .npy} file; the
     *                             message names the file and what was found
     * @throws IOException         on a read error
     */
    public static INDArray read(Path file) throws IOException {
        return read(file, false);
    }

    /**
     * Reads an int32 or int64 array (document ids, for instance).
     *
     * @param file the {@code .npy} file
     * @return a C-order INT or LONG array of the file's shape
     * @throws NoSuchFileException if the file does not exist
     * @throws NpyFormatException  if the file is not a well-formed int32/int64 {@code .npy} file
     * @throws IOException         on a read error
     */
    public static INDArray readIntegers(Path file) throws IOException {
        return read(file, true);
    }

    private static INDArray read(Path file, boolean integers) throws IOException {
        String name = file.getFileName().toString();
        try (InputStream in = Files.newInputStream(file)) {
            Header h = readHeader(in, name);
            boolean isInteger = h.dataType == DataType.INT || h.dataType == DataType.LONG;
            if (isInteger != integers) {
                throw new NpyFormatException(name + " has dtype '" + h.descr + "'; expected " + (integers
                        ? "int32 ('<i4') or int64 ('<i8')" : "float32 ('<f4') or float64 ('<f8')"));
            }
            long count = 1;
            for (long d : h.shape) {
                count = Math.multiplyExact(count, d);
            }
            long expected = count * h.itemSize();
            long actual = Files.size(file) - h.dataOffset;
            if (actual != expected) {
                throw new NpyFormatException(name + " holds " + actual + " data bytes; its header "
                        + Arrays.toString(h.shape) + " " + h.descr + " needs " + expected);
            }
            if (count > Integer.MAX_VALUE - 8) {
                throw new NpyFormatException(name + " has " + count + " elements; at most "
                        + (Integer.MAX_VALUE - 8) + " are supported");
            }
            char order = h.fortranOrder ? 'f' : 'c';
            if (count == 0) {
                return Nd4j.create(h.dataType, h.shape, 'c');
            }
            INDArray array = switch (h.dataType) {
                case DOUBLE -> Nd4j.create(readDoubles(in, (int) count, h.byteOrder, name), h.shape, order);
                case FLOAT -> Nd4j.create(readFloats(in, (int) count, h.byteOrder, name), h.shape, order);
                case INT -> Nd4j.createFromArray(readInts(in, (int) count, h.byteOrder, name)).reshape(order, h.shape);
                default -> Nd4j.createFromArray(readLongs(in, (int) count, h.byteOrder, name)).reshape(order, h.shape);
            };
            return order == 'c' ? array : array.dup('c');
        }
    }

    /**
     * Writes a float32 or float64 array as {@code .npy} version 1.0 (little-endian, C order).
     *
     * @param file  the file to create or replace
     * @param array a FLOAT or DOUBLE array of any shape
     * @throws IllegalArgumentException if the array is of another type
     * @throws IOException              on a write error
     */
    public static void write(Path file, INDArray array) throws IOException {
        DataType type = array.dataType();
        if (type != DataType.FLOAT && type != DataType.DOUBLE) {
            throw new IllegalArgumentException("Npy: only float32 and float64 arrays are written, got " + type);
        }
        byte[] header = header(type == DataType.FLOAT ? "<f4" : "<f8", array.shape());
        // asFloat()/asDouble() return the whole buffer: only a plain C-order array maps 1:1 onto the file.
        boolean plain = array.ordering() == 'c' && !array.isView() && array.data().length() == array.length();
        INDArray c = plain ? array : array.dup('c');
        try (OutputStream out = Files.newOutputStream(file)) {
            out.write(header);
            if (c.length() == 0) {
                return;
            }
            if (type == DataType.FLOAT) {
                writeFloats(out, c.data().asFloat());
            } else {
                writeDoubles(out, c.data().asDouble());
            }
        }
    }

    static byte[] header(String descr, long[] shape) {
        StringBuilder dims = new StringBuilder();
        for (long d : shape) {
            dims.append(d).append(", ");
        }
        // numpy writes a 1-tuple as "(n,)" and the empty tuple as "()".
        String tuple = shape.length == 1 ? "(" + shape[0] + ",)"
                : "(" + (shape.length == 0 ? "" : dims.substring(0, dims.length() - 2)) + ")";
        String dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + tuple + ", }";
        int unpadded = MAGIC.length + 2 + 2 + dict.length() + 1;
        int padding = (ALIGN - unpadded % ALIGN) % ALIGN;
        String text = dict + " ".repeat(padding) + "\n";
        ByteBuffer b = ByteBuffer.allocate(MAGIC.length + 4 + text.length()).order(ByteOrder.LITTLE_ENDIAN);
        b.put(MAGIC).put((byte) 1).put((byte) 0).putShort((short) text.length());
        b.put(text.getBytes(StandardCharsets.ISO_8859_1));
        return b.array();
    }

    private static Header readHeader(InputStream in, String name) throws IOException {
        byte[] magic = in.readNBytes(MAGIC.length + 2);
        if (magic.length < MAGIC.length + 2 || !Arrays.equals(Arrays.copyOf(magic, MAGIC.length), MAGIC)) {
            throw new NpyFormatException(name + " is not a NumPy .npy file (no \\x93NUMPY magic)");
        }
        int major = magic[MAGIC.length];
        long headerLength;
        int prefix;
        // Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4, little-endian.
        if (major == 1) {
            headerLength = littleEndian(readFully(in, 2, name)).getShort() & 0xFFFF;
            prefix = MAGIC.length + 4;
        } else if (major == 2 || major == 3) {
            headerLength = littleEndian(readFully(in, 4, name)).getInt() & 0xFFFFFFFFL;
            prefix = MAGIC.length + 6;
        } else {
            throw new NpyFormatException(name + " has .npy format version " + major + "; expected 1, 2 or 3");
        }
        if (headerLength > 1 << 20) {
            throw new NpyFormatException(name + " has a " + headerLength + "-byte header; not a valid .npy file");
        }
        // Version 3 allows UTF-8 in the header; the fields we read are ASCII either way.
        String text = new String(readFully(in, (int) headerLength, name), StandardCharsets.UTF_8);
        return parseHeader(text, name, prefix + headerLength);
    }

    private static Header parseHeader(String text, String name, long dataOffset) throws NpyFormatException {
        Matcher descr = DESCR.matcher(text);
        Matcher fortran = FORTRAN.matcher(text);
        Matcher shape = SHAPE.matcher(text);
        if (!descr.find() || !fortran.find() || !shape.find()) {
            throw new NpyFormatException(name + " has a malformed .npy header: " + text.strip());
        }
        String d = descr.group(1);
        DataType type;
        if (d.length() == 3 && d.endsWith("f4")) {
            type = DataType.FLOAT;
        } else if (d.length() == 3 && d.endsWith("f8")) {
            type = DataType.DOUBLE;
        } else if (d.length() == 3 && d.endsWith("i4")) {
            type = DataType.INT;
        } else if (d.length() == 3 && d.endsWith("i8")) {
            type = DataType.LONG;
        } else {
            throw new NpyFormatException(name + " has dtype '" + d + "'; expected float32 ('<f4') or float64 ('<f8')"
                    + " (document ids: int32 ('<i4') or int64 ('<i8'))");
        }
        ByteOrder order;
        switch (d.charAt(0)) {
            case '<', '=' -> order = ByteOrder.LITTLE_ENDIAN;
            case '>' -> order = ByteOrder.BIG_ENDIAN;
            default -> throw new NpyFormatException(name + " has dtype '" + d + "' with an unknown byte order");
        }
        List<Long> dims = new ArrayList<>();
        for (String part : shape.group(1).split(",")) {
            if (!part.isBlank()) {
                try {
                    dims.add(Long.parseLong(part.strip()));
                } catch (NumberFormatException e) {
                    throw new NpyFormatException(name + " has a malformed shape (" + shape.group(1) + ")");
                }
            }
        }
        long[] dimArray = dims.stream().mapToLong(Long::longValue).toArray();
        for (long dim : dimArray) {
            if (dim < 0) {
                throw new NpyFormatException(name + " has a negative dimension in shape (" + shape.group(1) + ")");
            }
        }
        return new Header(d, type, order, "True".equals(fortran.group(1)), dimArray, dataOffset);
    }

    private static float[] readFloats(InputStream in, int count, ByteOrder order, String name) throws IOException {
        float[] out = new float[count];
        for (int start = 0; start < count; start += CHUNK_ELEMENTS) {
            int n = Math.min(CHUNK_ELEMENTS, count - start);
            byte[] bytes = readFully(in, n * Float.BYTES, name);
            ByteBuffer.wrap(bytes).order(order).asFloatBuffer().get(out, start, n);
        }
        return out;
    }

    private static int[] readInts(InputStream in, int count, ByteOrder order, String name) throws IOException {
        int[] out = new int[count];
        for (int start = 0; start < count; start += CHUNK_ELEMENTS) {
            int n = Math.min(CHUNK_ELEMENTS, count - start);
            ByteBuffer.wrap(readFully(in, n * Integer.BYTES, name)).order(order).asIntBuffer().get(out, start, n);
        }
        return out;
    }

    private static long[] readLongs(InputStream in, int count, ByteOrder order, String name) throws IOException {
        long[] out = new long[count];
        for (int start = 0; start < count; start += CHUNK_ELEMENTS) {
            int n = Math.min(CHUNK_ELEMENTS, count - start);
            ByteBuffer.wrap(readFully(in, n * Long.BYTES, name)).order(order).asLongBuffer().get(out, start, n);
        }
        return out;
    }

    private static double[] readDoubles(InputStream in, int count, ByteOrder order, String name) throws IOException {
        double[] out = new double[count];
        for (int start = 0; start < count; start += CHUNK_ELEMENTS) {
            int n = Math.min(CHUNK_ELEMENTS, count - start);
            byte[] bytes = readFully(in, n * Double.BYTES, name);
            ByteBuffer.wrap(bytes).order(order).asDoubleBuffer().get(out, start, n);
        }
        return out;
    }

    private static void writeFloats(OutputStream out, float[] data) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(CHUNK_ELEMENTS * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int start = 0; start < data.length; start += CHUNK_ELEMENTS) {
            int n = Math.min(CHUNK_ELEMENTS, data.length - start);
            b.clear();
            b.asFloatBuffer().put(data, start, n);
            out.write(b.array(), 0, n * Float.BYTES);
        }
    }

    private static void writeDoubles(OutputStream out, double[] data) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(CHUNK_ELEMENTS * Double.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int start = 0; start < data.length; start += CHUNK_ELEMENTS) {
            int n = Math.min(CHUNK_ELEMENTS, data.length - start);
            b.clear();
            b.asDoubleBuffer().put(data, start, n);
            out.write(b.array(), 0, n * Double.BYTES);
        }
    }

    private static ByteBuffer littleEndian(byte[] bytes) {
        return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static byte[] readFully(InputStream in, int n, String name) throws IOException {
        byte[] b = in.readNBytes(n);
        if (b.length != n) {
            throw new NpyFormatException(name + " ends early (wanted " + n + " more bytes, got " + b.length + ")");
        }
        return b;
    }

    private record Header(String descr, DataType dataType, ByteOrder byteOrder, boolean fortranOrder,
                          long[] shape, long dataOffset) {
        int itemSize() {
            return dataType == DataType.DOUBLE || dataType == DataType.LONG ? 8 : 4;
        }
    }
}
