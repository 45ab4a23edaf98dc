package org.attn4j.distributed.transport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;

import io.aeron.Publication;
import org.agrona.DirectBuffer;

/**
 * The sending end of a TCP link to one peer: a connection this rank opens to the peer's listener
 * ({@link TcpInbound}), used in this direction only. Records go on the stream as a 4-byte length (little-endian)
 * and the record's bytes, written straight from the caller's buffers (a gathering write); when the kernel takes
 * only part of a record, the rest of its header is copied aside and the rest of its payload is kept as a view of
 * the caller's buffer ({@link #keepsPayload}), both sent before the next record, so a record is offered whole
 * or not at all, as on an Aeron publication. A refused connection (the peer's listener is not up yet) is tried
 * again every {@value #RETRY_MS} ms; the sender fails the peer if no data moves within the timeout.
 * Used by one thread at a time.
 */
final class TcpOutbound implements Outbound, AutoCloseable {

    /** Bytes before each record: its length. */
    static final int PREFIX = 4;
    private static final long RETRY_MS = 20;

    private final InetSocketAddress target;
    private final int maxRecord;
    private final String name;
    private SocketChannel channel;
    private boolean connected;
    private long nextAttemptNs;
    private String closedReason;
    private final ByteBuffer head = ByteBuffer.allocateDirect(PREFIX + MessageDescriptor.MAX_HEADER_LENGTH
            + MessageDescriptor.HELLO_PAYLOAD_LENGTH).order(ByteOrder.LITTLE_ENDIAN);
    private final ByteBuffer[] pair = new ByteBuffer[2];
    /** The unsent rest of the last record's prefix and header; empty (no remaining bytes) otherwise. */
    private final ByteBuffer headRest = ByteBuffer.allocateDirect(head.capacity()).limit(0);
    /** The unsent rest of the last record's payload, a view of the caller's buffer; null or empty otherwise. */
    private ByteBuffer payloadRest;
    /** Bytes of every record offered so far, prefixes included. */
    private long offered;
    /** Bytes handed to the kernel so far. */
    private long written;

    /**
     * @param host      the peer's host (an address or name; IPv6 in brackets is accepted)
     * @param port      the peer's listening port
     * @param maxRecord the largest record offered
     * @param name      names the link in messages, e.g. "rank 0 to rank 2"
     */
    TcpOutbound(String host, int port, int maxRecord, String name) {
        String bare = host.startsWith("[") ? host.substring(1, host.length() - 1) : host;
        this.target = new InetSocketAddress(bare, port);
        this.maxRecord = maxRecord;
        this.name = name;
    }

    @Override
    public boolean isConnected() {
        if (closedReason != null) {
            return false;
        }
        if (!connected) {
            tryConnect();
        }
        return connected;
    }

    private void tryConnect() {
        long now = System.nanoTime();
        try {
            if (channel == null) {
                if (now - nextAttemptNs < 0) {
                    return;
                }
                channel = SocketChannel.open();
                channel.configureBlocking(false);
                channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
                connected = channel.connect(target);
            } else {
                connected = channel.finishConnect();
            }
        } catch (IOException e) {
            // Refused or unreachable for now: the peer may not listen yet. Tried again shortly; the sender gives up
            // when nothing moves within the timeout.
            quietClose();
            nextAttemptNs = now + TimeUnit.MILLISECONDS.toNanos(RETRY_MS);
        }
    }

    @Override
    public long offer(DirectBuffer header, int headerLength, DirectBuffer payload, int payloadLength) {
        long ready = ready();
        if (ready != 0) {
            return ready;
        }
        head.clear();
        head.putInt(headerLength + payloadLength);
        header.getBytes(0, head, headerLength);
        head.flip();
        return write(head, view(payload, payloadLength));
    }

    @Override
    public long offer(DirectBuffer buffer, int length) {
        long ready = ready();
        if (ready != 0) {
            return ready;
        }
        head.clear();
        head.putInt(length);
        buffer.getBytes(0, head, length);
        head.flip();
        return write(head, null);
    }

    /** 0 when a record may be written now, else the offer's result. */
    private long ready() {
        if (closedReason != null) {
            return Publication.CLOSED;
        }
        if (!isConnected()) {
            return Publication.NOT_CONNECTED;
        }
        if (hasBacklog()) {
            flush();
            if (closedReason != null) {
                return Publication.CLOSED;
            }
            if (hasBacklog()) {
                return Publication.BACK_PRESSURED;
            }
        }
        return 0;
    }

    private long write(ByteBuffer first, ByteBuffer second) {
        long length = first.remaining() + (second == null ? 0 : second.remaining());
        long n;
        try {
            n = writeOut(first, second);
        } catch (IOException e) {
            fail(e);
            return Publication.CLOSED;
        }
        if (n == 0) {
            return Publication.BACK_PRESSURED;              // nothing taken: the record is not offered
        }
        written += n;
        if (n < length) {
            // Part of the record is in the kernel: the rest of the header is copied (the caller reuses it), the
            // payload's rest stays where it is until it has been written (see keepsPayload).
            headRest.clear();
            headRest.put(first);
            headRest.flip();
            payloadRest = second != null && second.hasRemaining() ? second : null;
        }
        offered += length;
        return offered;
    }

    @Override
    public int flush() {
        if (!hasBacklog() || closedReason != null) {
            return 0;
        }
        try {
            long n = writeOut(headRest, payloadRest);
            if (payloadRest != null && !payloadRest.hasRemaining()) {
                payloadRest = null;
            }
            written += n;
            return (int) n;
        } catch (IOException e) {
            fail(e);
            return 0;
        }
    }

    /** Writes what the kernel takes of {@code first} then {@code second} (null: none); the bytes written. */
    private long writeOut(ByteBuffer first, ByteBuffer second) throws IOException {
        if (second == null) {
            return channel.write(first);
        }
        pair[0] = first;
        pair[1] = second;
        try {
            return channel.write(pair);
        } finally {
            pair[1] = null;
        }
    }

    @Override
    public boolean hasBacklog() {
        return headRest.hasRemaining() || payloadRest != null;
    }

    /** The payload of a record may be read until {@link #sent} reports its position. */
    @Override
    public boolean keepsPayload() {
        return true;
    }

    @Override
    public int maxMessageLength() {
        return maxRecord;
    }

    @Override
    public boolean sent(long position) {
        return written >= position || closedReason != null;
    }

    @Override
    public String closedReason() {
        return closedReason;
    }

    private void fail(IOException e) {
        closedReason = "the TCP connection " + name + " failed: " + e.getMessage();
        quietClose();
    }

    /** Closes the connection, dropping what was not yet handed to the kernel: the peer has failed. */
    @Override
    public void abandon() {
        close();
    }

    /** Closes the connection; what the kernel already holds is still delivered. */
    @Override
    public void close() {
        if (closedReason == null) {
            closedReason = "the TCP connection " + name + " is closed";
        }
        quietClose();
    }

    private void quietClose() {
        connected = false;
        headRest.limit(0);
        payloadRest = null;
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // closing anyway
            }
            channel = null;
        }
    }

    /** The first {@code length} bytes of {@code buffer} as a ByteBuffer, without copying. */
    private static ByteBuffer view(DirectBuffer buffer, int length) {
        if (buffer.byteArray() != null) {
            return ByteBuffer.wrap(buffer.byteArray(), buffer.wrapAdjustment(), length);
        }
        ByteBuffer b = buffer.byteBuffer().duplicate();
        b.clear();
        b.limit(buffer.wrapAdjustment() + length).position(buffer.wrapAdjustment());
        return b;
    }
}
