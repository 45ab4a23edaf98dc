package org.attn4j.models.hf;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * One safetensors file (Hugging Face's format: an 8-byte little-endian header length, a JSON header naming each
 * tensor's dtype, shape and byte range, then the data), read tensor by tensor and written whole.
 *
 * <p>Opening reads and checks the header only: every range must lie inside the file, ranges must not overlap, and
 * each must hold exactly {@code product(shape) * dtype size} bytes; a file cut short, a header whose offsets overlap
 * or run past the end, or an unknown dtype fails in one line naming the file and the tensor. {@link #read} then
 * reads one tensor (F32, F16, BF16 or F64) straight into an array of the type asked for, so a loader holds one
 * tensor's bytes at a time beside the network.
 */
public final class Safetensors {

    private static final ObjectMapper JSON = new ObjectMapper();
    /** The largest header accepted (Hugging Face's reader refuses more than 100 MB as well). */
    private static final long MAX_HEADER = 100L << 20;

    /** One tensor's entry in the header. */
    public record Entry(String name, String dtype, long[] shape, long begin, long end) {
        /** Elements in the tensor. */
        public long length() {
            long n = 1;
            for (long d : shape) {
                n *= d;
            }
            return n;
        }
    }

    private final Path file;
    private final long dataStart;
    private final Map<String, Entry> entries;
    private final Map<String, String> metadata;

    private Safetensors(Path file, long dataStart, Map<String, Entry> entries, Map<String, String> metadata) {
        this.file = file;
        this.dataStart = dataStart;
        this.entries = entries;
        this.metadata = metadata;
    }

    /**
     * Opens {@code file} and checks its header.
     *
     * @throws IOException             if the file cannot be read
     * @throws IllegalArgumentException naming the file (and the tensor) when the file is not a whole, consistent
     *                                  safetensors file
     */
    public static Safetensors open(Path file) throws IOException {
        long size = Files.size(file);
        String where = file.toString();
        if (size < 8) {
            throw new IllegalArgumentException(where + ": not a safetensors file: " + size + " bytes, a header "
                    + "length alone takes 8");
        }
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(ch, len, 0);
            long headerLength = len.flip().getLong();
            if (headerLength <= 0 || headerLength > MAX_HEADER || 8 + headerLength > size) {
                throw new IllegalArgumentException(where + ": header length " + headerLength + " does not fit a "
                        + "file of " + size + " bytes (truncated, or not a safetensors file)");
            }
            ByteBuffer header = ByteBuffer.allocate((int) headerLength);
            readFully(ch, header, 8);
            JsonNode root;
            try {
                root = JSON.readTree(new String(header.array(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new IllegalArgumentException(where + ": the header is not JSON: " + e.getMessage(), e);
            }
            if (root == null || !root.isObject()) {
                throw new IllegalArgumentException(where + ": the header is not a JSON object");
            }
            long dataStart = 8 + headerLength;
            long dataSize = size - dataStart;
            Map<String, Entry> entries = new LinkedHashMap<>();
            Map<String, String> metadata = new LinkedHashMap<>();
            for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> f = it.next();
                if (f.getKey().equals("__metadata__")) {
                    f.getValue().fields().forEachRemaining(m -> metadata.put(m.getKey(), m.getValue().asText()));
                    continue;
                }
                entries.put(f.getKey(), entry(where, f.getKey(), f.getValue(), dataSize));
            }
            checkNoOverlap(where, entries.values());
            return new Safetensors(file, dataStart, Collections.unmodifiableMap(entries),
                    Collections.unmodifiableMap(metadata));
        }
    }

    private static Entry entry(String where, String name, JsonNode n, long dataSize) {
        String at = where + ": tensor " + name;
        JsonNode dtype = n.get("dtype");
        JsonNode shape = n.get("shape");
        JsonNode offsets = n.get("data_offsets");
        if (dtype == null || shape == null || !shape.isArray() || offsets == null || !offsets.isArray()
                || offsets.size() != 2) {
            throw new IllegalArgumentException(at + ": needs dtype, shape and data_offsets [begin, end], got " + n);
        }
        long[] dims = new long[shape.size()];
        for (int i = 0; i < dims.length; i++) {
            dims[i] = shape.get(i).asLong(-1);
            if (dims[i] < 0) {
                throw new IllegalArgumentException(at + ": shape " + shape + " has a negative or non-integer size");
            }
        }
        long begin = offsets.get(0).asLong(-1);
        long end = offsets.get(1).asLong(-1);
        if (begin < 0 || end < begin || end > dataSize) {
            throw new IllegalArgumentException(at + ": data_offsets [" + begin + ", " + end + "] run outside the "
                    + dataSize + " data bytes (truncated file or bad header)");
        }
        Entry e = new Entry(name, dtype.asText(), dims, begin, end);
        long expected = e.length() * width(at, e.dtype());
        if (end - begin != expected) {
            throw new IllegalArgumentException(at + ": " + e.dtype() + " " + Arrays.toString(dims) + " needs "
                    + expected + " bytes, its data_offsets hold " + (end - begin));
        }
        return e;
    }

    private static void checkNoOverlap(String where, java.util.Collection<Entry> entries) {
        List<Entry> sorted = new ArrayList<>(entries);
        sorted.sort(Comparator.comparingLong(Entry::begin));
        for (int i = 1; i < sorted.size(); i++) {
            Entry a = sorted.get(i - 1);
            Entry b = sorted.get(i);
            if (b.begin() < a.end()) {
                throw new IllegalArgumentException(where + ": tensors " + a.name() + " [" + a.begin() + ", " + a.end()
                        + ") and " + b.name() + " [" + b.begin() + ", " + b.end() + ") overlap");
            }
        }
    }

    /** Bytes per element of a safetensors dtype this reader handles. */
    private static int width(String at, String dtype) {
        return switch (dtype) {
            case "F32" -> 4;
            case "F16", "BF16" -> 2;
            case "F64" -> 8;
            default -> throw new IllegalArgumentException(at + ": dtype " + dtype + " is not supported (F32, F16, "
                    + "BF16 or F64; quantized and integer weights are not)");
        };
    }

    /** The file. */
    public Path file() {
        return file;
    }

    /** The tensors, in header order. */
    public Map<String, Entry> entries() {
        return entries;
    }

    /** The header's {@code __metadata__}. */
    public Map<String, String> metadata() {
        return metadata;
    }

    /**
     * Reads tensor {@code name} into a new C-order array of {@code type} (FLOAT or DOUBLE), widening F16 and BF16
     * exactly. The file is read and converted in chunks straight into the array's off-heap memory, so beside the
     * array only a chunk is held.
     *
     * @throws IllegalArgumentException if there is no such tensor
     * @throws IOException              if the file cannot be read
     */
    public INDArray read(String name, DataType type) throws IOException {
        Entry e = entries.get(name);
        if (e == null) {
            throw new IllegalArgumentException(file + ": no tensor " + name);
        }
        long n = e.length();
        if (n > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(file + ": tensor " + name + " has " + n + " elements, more than one "
                    + "array here holds");
        }
        long[] shape = e.shape().length == 0 ? new long[] {1} : e.shape();
        DataType target = type == DataType.DOUBLE ? DataType.DOUBLE : DataType.FLOAT;
        INDArray out = Nd4j.createUninitialized(target, shape, 'c');
        // The file is read a chunk at a time into one direct buffer and converted straight into the array's off-heap
        // buffer: neither the Java heap nor a mapping holds the tensor whole.
        int width = width(file + ": tensor " + name, e.dtype());
        int chunk = 1 << 18;
        ByteBuffer bytes = ByteBuffer.allocateDirect(chunk * width).order(ByteOrder.LITTLE_ENDIAN);
        float[] floats = target == DataType.FLOAT ? new float[chunk] : null;
        double[] doubles = target == DataType.DOUBLE ? new double[chunk] : null;
        Pointer base = out.data().pointer();
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            for (long from = 0; from < n; from += chunk) {
                int len = (int) Math.min(chunk, n - from);
                bytes.clear().limit(len * width);
                readFully(ch, bytes, dataStart + e.begin() + from * width);
                for (int i = 0; i < len; i++) {
                    double x = element(bytes, e.dtype(), i);
                    if (floats != null) {
                        floats[i] = (float) x;
                    } else {
                        doubles[i] = x;
                    }
                }
                if (floats != null) {
                    new FloatPointer(base).position(from).put(floats, 0, len);
                } else {
                    new DoublePointer(base).position(from).put(doubles, 0, len);
                }
            }
        }
        return out;
    }

    private static double element(ByteBuffer b, String dtype, int i) {
        return switch (dtype) {
            case "F32" -> b.getFloat(4 * i);
            case "F64" -> b.getDouble(8 * i);
            case "BF16" -> Float.intBitsToFloat((b.getShort(2 * i) & 0xffff) << 16);
            case "F16" -> halfToFloat(b.getShort(2 * i));
            default -> throw new IllegalStateException("dtype " + dtype);
        };
    }

    /** IEEE 754 half precision to float, exactly (subnormals, infinities and NaN included). */
    static float halfToFloat(short h) {
        int bits = h & 0xffff;
        int sign = (bits >>> 15) << 31;
        int exponent = (bits >>> 10) & 0x1f;
        int mantissa = bits & 0x3ff;
        if (exponent == 0x1f) {
            return Float.intBitsToFloat(sign | 0x7f800000 | (mantissa << 13));
        }
        if (exponent == 0) {
            float value = mantissa * 0x1p-24f;
            return sign == 0 ? value : -value;
        }
        return Float.intBitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
    }

    private static void readFully(FileChannel ch, ByteBuffer into, long position) throws IOException {
        long at = position;
        while (into.hasRemaining()) {
            int n = ch.read(into, at);
            if (n < 0) {
                throw new IOException("unexpected end of file at byte " + at);
            }
            at += n;
        }
    }

    /**
     * Writes {@code tensors} (name to array, in order) as one safetensors file of {@code dtype} ("F32" or "BF16",
     * rounding to nearest even), through a temporary file moved into place, so that a failed write leaves nothing
     * half-written under {@code file}.
     */
    public static void write(Path file, Map<String, INDArray> tensors, String dtype, Map<String, String> metadata)
            throws IOException {
        int w = switch (dtype) {
            case "F32" -> 4;
            case "BF16" -> 2;
            default -> throw new IllegalArgumentException("safetensors: write F32 or BF16, got " + dtype);
        };
        ObjectNode header = JSON.createObjectNode();
        if (metadata != null && !metadata.isEmpty()) {
            ObjectNode m = header.putObject("__metadata__");
            metadata.forEach(m::put);
        }
        long offset = 0;
        for (Map.Entry<String, INDArray> t : tensors.entrySet()) {
            ObjectNode e = header.putObject(t.getKey());
            e.put("dtype", dtype);
            var shape = e.putArray("shape");
            for (long d : t.getValue().shape()) {
                shape.add(d);
            }
            long bytes = t.getValue().length() * w;
            var offsets = e.putArray("data_offsets");
            offsets.add(offset);
            offsets.add(offset + bytes);
            offset += bytes;
        }
        byte[] json = JSON.writeValueAsString(header).getBytes(StandardCharsets.UTF_8);
        int padded = (json.length + 7) / 8 * 8;                    // the data starts 8-byte aligned
        byte[] head = Arrays.copyOf(json, padded);
        Arrays.fill(head, json.length, padded, (byte) ' ');
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(padded);
            writeFully(ch, len.flip());
            writeFully(ch, ByteBuffer.wrap(head));
            for (INDArray a : tensors.values()) {
                writeFully(ch, encode(a, dtype));
            }
            ch.force(true);
        }
        Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    private static ByteBuffer encode(INDArray a, String dtype) {
        double[] v = a.dup('c').data().asDouble();
        ByteBuffer b = ByteBuffer.allocate(v.length * ("F32".equals(dtype) ? 4 : 2)).order(ByteOrder.LITTLE_ENDIAN);
        for (double x : v) {
            if ("F32".equals(dtype)) {
                b.putFloat((float) x);
            } else {
                b.putShort(floatToBf16((float) x));
            }
        }
        return b.flip();
    }

    /** Float to bfloat16, rounding to nearest even (NaN stays NaN). */
    static short floatToBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) {
            return (short) ((bits >>> 16) | 0x40);
        }
        int rounding = 0x7fff + ((bits >>> 16) & 1);
        return (short) ((bits + rounding) >>> 16);
    }

    private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "Safetensors(%s, %d tensors)", file, entries.size());
    }
}
