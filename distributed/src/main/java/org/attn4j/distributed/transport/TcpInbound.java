package org.attn4j.distributed.transport;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * The receiving ends of this rank's TCP links: a listener on the rank's endpoint port (the UDP endpoint's number,
 * in TCP's port space) and the connections peers open to it ({@link TcpOutbound}), polled by the
 * {@link ReceiverAgent} on the progress thread without blocking. Each record on a connection is handed to the
 * receiver as Aeron fragments would be: a first fragment with the whole header (and, for a short record, all
 * of it), then the payload in pieces as they are read, the last one marked as the end; or, where the receiver
 * names the array the payload belongs in ({@link Sink#target}), the payload is read from the socket straight
 * into it. The receiver may leave a record's first fragment for a later poll (a message no receive waits for
 * yet), and the connection is not read further until it takes it. The receiver applies
 * the same checks as on Aeron links (HELLO with the job token before anything else, CRC32C per chunk).
 * A record length that no sender of this job writes closes the connection.
 */
final class TcpInbound implements AutoCloseable {

    /** Bytes read per connection per poll before the next connection's turn. */
    private static final int READ_BUDGET = 4 << 20;
    /** How often the listener is checked for connections once every expected peer has connected. */
    private static final long ACCEPT_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(10);
    /** The first fragment of a record: up to the largest header and a HELLO's payload. */
    private static final int HEAD = MessageDescriptor.MAX_HEADER_LENGTH + MessageDescriptor.HELLO_PAYLOAD_LENGTH;
    private static final int BODY = 256 << 10;

    /** Receives what the connections carry; implemented by the {@link ReceiverAgent}. */
    interface Sink {
        /** A new connection; returns the receiver's state for it. */
        Object opened(String from);

        /**
         * A fragment of a record, as {@code FragmentHandler.onFragment} with begin and end flags.
         *
         * @return false to leave a record's first fragment unread for now: it is offered again on a later poll,
         *         and nothing more is read from its connection meanwhile (always true for later fragments)
         */
        boolean fragment(Object session, UnsafeBuffer buffer, int offset, int length, boolean begin, boolean end);

        /**
         * Where up to {@code max} bytes of the payload being read may go straight from the socket (the array the
         * message is written into, at the current chunk's position), or null to take them as fragments.
         */
        ByteBuffer target(Object session, int max);

        /** {@code n} bytes were read into the last {@link #target}; {@code end}: the record is complete. */
        void wroteTarget(Object session, int n, boolean end);

        /** The connection ended (the peer closed it or it failed), or carried a record no sender writes. */
        void closed(Object session, String why);
    }

    private static final class Connection {
        final SocketChannel channel;
        final Object session;
        final String from;
        final ByteBuffer head = ByteBuffer.allocateDirect(TcpOutbound.PREFIX + HEAD).order(ByteOrder.LITTLE_ENDIAN);
        final UnsafeBuffer headView = new UnsafeBuffer(head);
        /** The current record's length, or -1 while its prefix is being read. */
        int recordLength = -1;
        /** Bytes of the current record still to read after its first fragment; -1 while that is being read. */
        int bodyLeft = -1;
        /** Whether the record's first fragment was left unread by the sink ({@link Sink#fragment}). */
        boolean held;
        /** Bytes read in the current poll. */
        int bytesRead;
        /** Payload bytes read past the last whole 8-byte word handed on, at most 7. */
        final byte[] carry = new byte[8];
        int carried;

        Connection(SocketChannel channel, Object session, String from) {
            this.channel = channel;
            this.session = session;
            this.from = from;
            head.limit(TcpOutbound.PREFIX);
        }
    }

    private final ServerSocketChannel server;
    private final int expected;
    private final int maxRecord;
    private final List<Connection> connections = new ArrayList<>();
    private final ByteBuffer body = ByteBuffer.allocateDirect(BODY);
    private final UnsafeBuffer bodyView = new UnsafeBuffer(body);
    private long nextAcceptNs;

    /**
     * Listens on {@code bind:port}.
     *
     * @param expected  how many peers connect (the listener is polled closely until they have)
     * @param maxRecord the largest record a sender writes
     * @throws TransportException when the port cannot be bound
     */
    TcpInbound(String bind, int port, int expected, int maxRecord) {
        this.expected = expected;
        this.maxRecord = maxRecord;
        String bare = bind.startsWith("[") ? bind.substring(1, bind.length() - 1) : bind;
        try {
            server = ServerSocketChannel.open();
            server.setOption(StandardSocketOptions.SO_REUSEADDR, true);
            server.configureBlocking(false);
            server.bind(new InetSocketAddress(bare, port), expected + 8);
        } catch (IOException e) {
            throw new TransportException("could not listen on TCP " + bind + ":" + port + ": " + e.getMessage(), e);
        }
    }

    /** Accepts new connections and reads what has arrived; the bytes read. Progress thread. */
    int poll(Sink sink) {
        int work = accept(sink);
        for (Iterator<Connection> it = connections.iterator(); it.hasNext(); ) {
            Connection c = it.next();
            try {
                String bad = read(c, sink);
                if (bad == null) {
                    work += Math.max(0, c.bytesRead);
                    continue;
                }
                sink.closed(c.session, bad);
            } catch (IOException e) {
                sink.closed(c.session, "the connection failed: " + e.getMessage());
            }
            close(c.channel);
            it.remove();
        }
        return work;
    }

    private int accept(Sink sink) {
        long now = System.nanoTime();
        if (connections.size() >= expected && now - nextAcceptNs < 0) {
            return 0;
        }
        nextAcceptNs = now + ACCEPT_INTERVAL_NS;
        int accepted = 0;
        try {
            SocketChannel ch;
            while ((ch = server.accept()) != null) {
                ch.configureBlocking(false);
                ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
                String from = String.valueOf(ch.getRemoteAddress());
                connections.add(new Connection(ch, sink.opened(from), from));
                accepted++;
            }
        } catch (IOException e) {
            // A connection that failed while being accepted: its peer connects again.
        }
        return accepted;
    }

    /**
     * Reads from {@code c} until it has nothing more or the budget is spent, handing fragments to the sink.
     *
     * @return null, or why the connection must close (the peer closed it, or a bad record length)
     */
    private String read(Connection c, Sink sink) throws IOException {
        c.bytesRead = 0;
        while (c.bytesRead < READ_BUDGET) {
            if (c.held) {
                if (!offerHead(c, sink)) {
                    return null;
                }
            } else if (c.bodyLeft <= 0) {
                int n = c.channel.read(c.head);
                if (n < 0) {
                    return "the peer closed the connection";
                }
                c.bytesRead += n;
                if (c.head.hasRemaining()) {
                    return null;                                  // the rest has not arrived yet
                }
                if (c.recordLength < 0) {
                    c.recordLength = c.head.getInt(0);
                    if (c.recordLength < MessageDescriptor.FIXED_HEADER_LENGTH || c.recordLength > maxRecord) {
                        return "a record of " + c.recordLength + " bytes (expected "
                                + MessageDescriptor.FIXED_HEADER_LENGTH + " to " + maxRecord + ")";
                    }
                    c.head.limit(TcpOutbound.PREFIX + Math.min(HEAD, c.recordLength));
                    continue;
                }
                if (!offerHead(c, sink)) {
                    return null;
                }
            } else {
                // Straight into the receive's array where the receiver names it; else into the shared buffer, as
                // fragments of whole 8-byte words as Aeron's are (a receiver adding elements as it reads needs
                // whole ones): up to 7 bytes read past the last whole word wait in the connection's carry.
                ByteBuffer target = c.carried == 0 ? sink.target(c.session, c.bodyLeft) : null;
                if (target == null) {
                    body.clear();
                    body.put(c.carry, 0, c.carried);
                    body.limit(c.carried + Math.min(BODY - 8, c.bodyLeft));
                }
                int n = c.channel.read(target != null ? target : body);
                if (n < 0) {
                    return "the peer closed the connection in the middle of a record";
                }
                if (n == 0) {
                    return null;
                }
                c.bytesRead += n;
                c.bodyLeft -= n;
                if (target != null) {
                    sink.wroteTarget(c.session, n, c.bodyLeft == 0);
                } else {
                    int available = c.carried + n;
                    int whole = c.bodyLeft == 0 ? available : available & ~7;
                    c.carried = available - whole;
                    body.get(whole, c.carry, 0, c.carried);
                    if (whole > 0) {
                        sink.fragment(c.session, bodyView, 0, whole, false, c.bodyLeft == 0);
                    }
                }
                if (c.bodyLeft == 0) {
                    nextRecord(c);
                }
            }
        }
        return null;
    }

    /** Hands the record's first fragment to the sink; false if the sink left it for later. */
    private static boolean offerHead(Connection c, Sink sink) {
        int first = c.head.limit() - TcpOutbound.PREFIX;
        int bodyLeft = c.recordLength - first;
        c.held = !sink.fragment(c.session, c.headView, TcpOutbound.PREFIX, first, true, bodyLeft == 0);
        if (c.held) {
            return false;
        }
        c.bodyLeft = bodyLeft;
        if (bodyLeft == 0) {
            nextRecord(c);
        }
        return true;
    }

    private static void nextRecord(Connection c) {
        c.recordLength = -1;
        c.bodyLeft = -1;
        c.head.clear().limit(TcpOutbound.PREFIX);
    }

    /** Closes the listener and every connection. */
    @Override
    public void close() {
        close(server);
        for (Connection c : connections) {
            close(c.channel);
        }
        connections.clear();
    }

    private static void close(java.nio.channels.Channel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }
}
