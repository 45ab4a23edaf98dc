package org.attn4j.distributed.transport;

import java.nio.ByteOrder;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * Wire layout of an {@link AeronTransport} message: one Aeron message, a header followed by a payload. An array
 * larger than one chunk travels as several DATA messages with consecutive chunk indices, each with the full
 * header, so the receiver can allocate the array from whichever chunk it sees first and check every chunk on its
 * own.
 *
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                       Job Id (64 bits)                        |   0
 *  |                                                               |
 *  +---------------+---------------+---------------+---------------+
 *  |    Version    |     Type      |     DType     |  Array Rank   |   8
 *  +---------------+---------------+---------------+---------------+
 *  |                          Source Rank                          |  12
 *  +---------------------------------------------------------------+
 *  |                              Tag                              |  16
 *  +---------------------------------------------------------------+
 *  |                          Chunk Index                          |  20
 *  +---------------------------------------------------------------+
 *  |                          Chunk Count                          |  24
 *  +---------------------------------------------------------------+
 *  |                 Chunk Length (payload bytes here)             |  28
 *  +---------------------------------------------------------------+
 *  |                 Sequence Number (64 bits, per peer)           |  32
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |            Payload Length (64 bits, the whole array)          |  40
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |         Chunk Offset (64 bits, byte offset in the array)      |  48
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                           CRC32C                              |  56
 *  +---------------------------------------------------------------+
 *  |                            Flags                              |  60
 *  +---------------------------------------------------------------+
 *  |              Shape: Array Rank x 64-bit dimensions           ...  64
 *  +---------------------------------------------------------------+
 *  |              Chunk payload: Chunk Length bytes               ...  64 + 8 x Array Rank
 *  +---------------------------------------------------------------+
 * </pre>
 *
 * <p>Integers are little-endian. The payload is the array's elements in C order, in the sender's native byte
 * order (the project assumes little-endian hosts). The CRC32C covers bytes 0 to 55, the flags, the shape and the
 * chunk payload, so a damaged tag or shape is caught as well as damaged data. Flags: {@link #PAYLOAD_UNCHECKED}
 * (bit 0), set on DATA sent over Aeron IPC without payload checksums, whose CRC then covers the header only; a
 * receiver accepts it only on an IPC connection. {@link #REMOTE_PAYLOAD} (bit 1): DATA over IPC whose payload stays
 * in the sender's memory: the message is one chunk of the whole array whose Chunk Length bytes are not in the
 * message, which carries instead the 64-bit address of the array's first byte in the sender's process (the CRC
 * covers the header and those 8 bytes); the receiver copies the payload from there ({@link ProcessMemory}) and
 * answers with a {@link #RELEASE}, after which the sender may reuse the array. The job id is derived from the job
 * token ({@link JobToken}); a receiver drops messages of another job.
 *
 * <p>Message types: {@link #HELLO} (first message on every connection; payload: SHA-256 digest of the token, 32
 * bytes, the sender's world size, 4 bytes, flags, 4 bytes (bit 0: the sender waits for an acknowledgement; bit 1:
 * the sender can read the receiver's memory), the sender's incarnation, 8 bytes, the incarnation of the receiver
 * whose HELLO this one acknowledges, 8 bytes, 0 for none, the sender's process id, 8 bytes, and the address of 8
 * bytes in the sender's process holding its incarnation, 8 bytes, for the receiver to try a read of its memory),
 * {@link #DATA} (one chunk of an array), {@link #HEARTBEAT} and {@link #GOODBYE} (no payload), {@link #RELEASE} (no
 * payload: the receiver has read the payload of the sender's REMOTE_PAYLOAD message with the given sequence
 * number, and of every earlier one). Only DATA uses dtype, shape and chunk fields; DATA and RELEASE the sequence.
 *
 * <p>An incarnation is a random number drawn by each transport when it starts. A sender sends DATA to a peer
 * only once a HELLO from that peer acknowledged its own incarnation: its HELLO reached the very transport that
 * will receive the data, not an earlier one still bound to the same endpoint (whose connection Aeron would
 * hand over to the new one in mid-stream, after the HELLO).
 */
final class MessageDescriptor {

    static final byte VERSION = 4;

    static final byte HELLO = 1;
    static final byte DATA = 2;
    static final byte HEARTBEAT = 3;
    static final byte GOODBYE = 4;
    static final byte RELEASE = 5;

    static final int JOB_ID_OFFSET = 0;
    static final int VERSION_OFFSET = 8;
    static final int TYPE_OFFSET = 9;
    static final int DTYPE_OFFSET = 10;
    static final int ARRAY_RANK_OFFSET = 11;
    static final int SOURCE_RANK_OFFSET = 12;
    static final int TAG_OFFSET = 16;
    static final int CHUNK_INDEX_OFFSET = 20;
    static final int CHUNK_COUNT_OFFSET = 24;
    static final int CHUNK_LENGTH_OFFSET = 28;
    static final int SEQUENCE_OFFSET = 32;
    static final int PAYLOAD_LENGTH_OFFSET = 40;
    static final int CHUNK_OFFSET_OFFSET = 48;
    static final int CHECKSUM_OFFSET = 56;
    static final int FLAGS_OFFSET = 60;
    static final int SHAPE_OFFSET = 64;

    /** Flag: the CRC covers the header only (DATA over IPC without payload checksums). */
    static final int PAYLOAD_UNCHECKED = 1;
    /** Flag: the payload stays in the sender's memory; the message carries its address. */
    static final int REMOTE_PAYLOAD = 2;
    /** Bytes a REMOTE_PAYLOAD message carries after its header: the address. */
    static final int REMOTE_DESCRIPTOR_LENGTH = 8;

    /** Header bytes before the shape. */
    static final int FIXED_HEADER_LENGTH = SHAPE_OFFSET;
    /** Arrays of more dimensions are refused; keeps every header inside the first Aeron fragment. */
    static final int MAX_ARRAY_RANK = 32;
    /** The longest header: the fixed part and a shape of {@link #MAX_ARRAY_RANK} dimensions. */
    static final int MAX_HEADER_LENGTH = FIXED_HEADER_LENGTH + 8 * MAX_ARRAY_RANK;
    /**
     * HELLO payload: token digest, world size, flags, incarnation, acknowledged incarnation, process id, probe
     * address.
     */
    static final int HELLO_PAYLOAD_LENGTH = JobToken.DIGEST_LENGTH + 4 + 4 + 8 + 8 + 8 + 8;
    /** HELLO flag: the sender waits for a HELLO acknowledging its incarnation. */
    static final int HELLO_WANTS_ACK = 1;
    /** HELLO flag: the sender read the receiver's probe bytes, so it can take REMOTE_PAYLOAD messages. */
    static final int HELLO_READS_YOU = 2;
    private static final int HELLO_FLAGS_OFFSET = JobToken.DIGEST_LENGTH + 4;
    private static final int HELLO_INCARNATION_OFFSET = HELLO_FLAGS_OFFSET + 4;
    private static final int HELLO_ACKNOWLEDGED_OFFSET = HELLO_INCARNATION_OFFSET + 8;
    private static final int HELLO_PID_OFFSET = HELLO_ACKNOWLEDGED_OFFSET + 8;
    private static final int HELLO_PROBE_OFFSET = HELLO_PID_OFFSET + 8;

    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;
    private static final List<DataType> CARRIED = List.of(DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16,
            DataType.BFLOAT16, DataType.INT32, DataType.INT64);
    private static final Map<DataType, Byte> CODES = new EnumMap<>(DataType.class);

    static {
        for (int i = 0; i < CARRIED.size(); i++) {
            CODES.put(CARRIED.get(i), (byte) (i + 1));
        }
    }

    private MessageDescriptor() {
    }

    /** The header length of a message whose array has {@code arrayRank} dimensions. */
    static int headerLength(int arrayRank) {
        return FIXED_HEADER_LENGTH + 8 * arrayRank;
    }

    /** Whether arrays of {@code type} can travel. */
    static boolean carries(DataType type) {
        return CODES.containsKey(type);
    }

    /** The types that can travel, for error messages. */
    static List<DataType> carriedTypes() {
        return CARRIED;
    }

    /** The wire code of a carried type (0 for none, in control messages). */
    static byte dtypeCode(DataType type) {
        Byte code = CODES.get(type);
        if (code == null) {
            throw new IllegalArgumentException("MessageDescriptor: type " + type + " is not carried");
        }
        return code;
    }

    /** The type of a wire code, or null for an unknown code. */
    static DataType dataType(byte code) {
        return code >= 1 && code <= CARRIED.size() ? CARRIED.get(code - 1) : null;
    }

    /**
     * Writes a header (checksum zero) at offset 0 of {@code b}.
     *
     * @return the header length
     */
    static int writeHeader(MutableDirectBuffer b, long jobId, byte type, int sourceRank, int tag, byte dtype,
                           long[] shape, long sequence, int chunkIndex, int chunkCount, long payloadLength,
                           long chunkOffset, int chunkLength) {
        b.putLong(JOB_ID_OFFSET, jobId, ORDER);
        b.putByte(VERSION_OFFSET, VERSION);
        b.putByte(TYPE_OFFSET, type);
        b.putByte(DTYPE_OFFSET, dtype);
        b.putByte(ARRAY_RANK_OFFSET, (byte) shape.length);
        b.putInt(SOURCE_RANK_OFFSET, sourceRank, ORDER);
        b.putInt(TAG_OFFSET, tag, ORDER);
        b.putInt(CHUNK_INDEX_OFFSET, chunkIndex, ORDER);
        b.putInt(CHUNK_COUNT_OFFSET, chunkCount, ORDER);
        b.putInt(CHUNK_LENGTH_OFFSET, chunkLength, ORDER);
        b.putLong(SEQUENCE_OFFSET, sequence, ORDER);
        b.putLong(PAYLOAD_LENGTH_OFFSET, payloadLength, ORDER);
        b.putLong(CHUNK_OFFSET_OFFSET, chunkOffset, ORDER);
        b.putInt(CHECKSUM_OFFSET, 0, ORDER);
        b.putInt(CHECKSUM_OFFSET + 4, 0, ORDER);
        for (int d = 0; d < shape.length; d++) {
            b.putLong(SHAPE_OFFSET + 8 * d, shape[d], ORDER);
        }
        return headerLength(shape.length);
    }

    /** Starts a checksum: resets {@code crc} and feeds it the checked header bytes of a header in a byte array. */
    static void checksumHeader(CRC32C crc, byte[] header, int arrayRank) {
        crc.reset();
        crc.update(header, 0, CHECKSUM_OFFSET);
        crc.update(header, FLAGS_OFFSET, 4);
        crc.update(header, SHAPE_OFFSET, 8 * arrayRank);
    }

    static long jobId(DirectBuffer b) {
        return b.getLong(JOB_ID_OFFSET, ORDER);
    }

    static byte version(DirectBuffer b) {
        return b.getByte(VERSION_OFFSET);
    }

    static byte type(DirectBuffer b) {
        return b.getByte(TYPE_OFFSET);
    }

    static byte dtype(DirectBuffer b) {
        return b.getByte(DTYPE_OFFSET);
    }

    /** The array rank, 0 to 255 as sent (validated by the reader against {@link #MAX_ARRAY_RANK}). */
    static int arrayRank(DirectBuffer b, int offset) {
        return b.getByte(offset + ARRAY_RANK_OFFSET) & 0xFF;
    }

    static int sourceRank(DirectBuffer b) {
        return b.getInt(SOURCE_RANK_OFFSET, ORDER);
    }

    static int tag(DirectBuffer b) {
        return b.getInt(TAG_OFFSET, ORDER);
    }

    static int chunkIndex(DirectBuffer b) {
        return b.getInt(CHUNK_INDEX_OFFSET, ORDER);
    }

    static int chunkCount(DirectBuffer b) {
        return b.getInt(CHUNK_COUNT_OFFSET, ORDER);
    }

    static int chunkLength(DirectBuffer b) {
        return b.getInt(CHUNK_LENGTH_OFFSET, ORDER);
    }

    static long sequence(DirectBuffer b) {
        return b.getLong(SEQUENCE_OFFSET, ORDER);
    }

    static long payloadLength(DirectBuffer b) {
        return b.getLong(PAYLOAD_LENGTH_OFFSET, ORDER);
    }

    static long chunkOffset(DirectBuffer b) {
        return b.getLong(CHUNK_OFFSET_OFFSET, ORDER);
    }

    static int checksum(DirectBuffer b) {
        return b.getInt(CHECKSUM_OFFSET, ORDER);
    }

    static int flags(DirectBuffer b) {
        return b.getInt(FLAGS_OFFSET, ORDER);
    }

    static void putFlags(MutableDirectBuffer b, int flags) {
        b.putInt(FLAGS_OFFSET, flags, ORDER);
    }

    static void putChecksum(MutableDirectBuffer b, int crc) {
        b.putInt(CHECKSUM_OFFSET, crc, ORDER);
    }

    static long[] shape(DirectBuffer b, int arrayRank) {
        long[] shape = new long[arrayRank];
        for (int d = 0; d < arrayRank; d++) {
            shape[d] = b.getLong(SHAPE_OFFSET + 8 * d, ORDER);
        }
        return shape;
    }

    /** Writes a HELLO payload at {@code offset}. */
    static void writeHello(MutableDirectBuffer b, int offset, byte[] tokenDigest, int worldSize, int flags,
                           long incarnation, long acknowledged, long pid, long probeAddress) {
        b.putBytes(offset, tokenDigest);
        b.putLong(offset + HELLO_PID_OFFSET, pid, ORDER);
        b.putLong(offset + HELLO_PROBE_OFFSET, probeAddress, ORDER);
        b.putInt(offset + JobToken.DIGEST_LENGTH, worldSize, ORDER);
        b.putInt(offset + HELLO_FLAGS_OFFSET, flags, ORDER);
        b.putLong(offset + HELLO_INCARNATION_OFFSET, incarnation, ORDER);
        b.putLong(offset + HELLO_ACKNOWLEDGED_OFFSET, acknowledged, ORDER);
    }

    /** The flags in a HELLO payload at {@code offset}. */
    static int helloFlags(DirectBuffer b, int offset) {
        return b.getInt(offset + HELLO_FLAGS_OFFSET, ORDER);
    }

    /** The sender's incarnation in a HELLO payload at {@code offset}. */
    static long helloIncarnation(DirectBuffer b, int offset) {
        return b.getLong(offset + HELLO_INCARNATION_OFFSET, ORDER);
    }

    /** The incarnation a HELLO payload at {@code offset} acknowledges, 0 for none. */
    static long helloAcknowledged(DirectBuffer b, int offset) {
        return b.getLong(offset + HELLO_ACKNOWLEDGED_OFFSET, ORDER);
    }

    /** The world size in a HELLO payload at {@code offset}. */
    static int helloWorldSize(DirectBuffer b, int offset) {
        return b.getInt(offset + JobToken.DIGEST_LENGTH, ORDER);
    }

    /** The sender's process id in a HELLO payload at {@code offset}. */
    static long helloPid(DirectBuffer b, int offset) {
        return b.getLong(offset + HELLO_PID_OFFSET, ORDER);
    }

    /** The address of the sender's probe bytes in a HELLO payload at {@code offset}. */
    static long helloProbeAddress(DirectBuffer b, int offset) {
        return b.getLong(offset + HELLO_PROBE_OFFSET, ORDER);
    }
}
