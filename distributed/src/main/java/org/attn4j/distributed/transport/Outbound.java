package org.attn4j.distributed.transport;

import io.aeron.ExclusivePublication;
import org.agrona.DirectBuffer;

/**
 * The sending end of one link to one peer, as the {@link SenderAgent} sees it: an Aeron publication (IPC or UDP)
 * or a TCP connection ({@link TcpOutbound}). An offer takes a whole record (one chunk, or a control message) or
 * nothing, with Aeron's result codes: a positive position, or {@code Publication.BACK_PRESSURED},
 * {@code NOT_CONNECTED} (both retried) or {@code CLOSED} (the link is gone). Used by one thread at a time (the
 * sender holds the link's lock).
 */
interface Outbound {

    /** Offers a record of {@code header} then {@code payload}. */
    long offer(DirectBuffer header, int headerLength, DirectBuffer payload, int payloadLength);

    /** Offers a record of {@code length} bytes of {@code buffer}. */
    long offer(DirectBuffer buffer, int length);

    /** Whether a record may be offered now (the connection is up). */
    boolean isConnected();

    /** The largest record an offer takes. */
    int maxMessageLength();

    /** Whether everything offered up to {@code position} has left for the peer (handed to the kernel). */
    boolean sent(long position);

    /** Moves bytes already offered but not yet handed to the kernel; the number of bytes moved (0: none). */
    default int flush() {
        return 0;
    }

    /**
     * Whether an offered record's payload may still be read after the offer returned, until {@link #sent} reports
     * its position (false: the offer copied it).
     */
    default boolean keepsPayload() {
        return false;
    }

    /** Whether offered bytes still wait for {@link #flush}. */
    default boolean hasBacklog() {
        return false;
    }

    /**
     * Gives the link up before the sender fails sends whose payload it may still read ({@link #keepsPayload}): it
     * reads none of it afterwards. Called when the peer is failed.
     */
    default void abandon() {
    }

    /** Why the link closed (after an offer returned {@code CLOSED}), or null to let the caller say. */
    default String closedReason() {
        return null;
    }

    /** An Aeron exclusive publication; {@code transport} reads its sender position. */
    static Outbound of(ExclusivePublication publication, AeronTransport transport) {
        return new Outbound() {
            @Override
            public long offer(DirectBuffer header, int headerLength, DirectBuffer payload, int payloadLength) {
                return publication.offer(header, 0, headerLength, payload, 0, payloadLength);
            }

            @Override
            public long offer(DirectBuffer buffer, int length) {
                return publication.offer(buffer, 0, length);
            }

            @Override
            public boolean isConnected() {
                return publication.isConnected();
            }

            @Override
            public int maxMessageLength() {
                return publication.maxMessageLength();
            }

            @Override
            public boolean sent(long position) {
                return transport.senderPosition(publication) >= position;
            }
        };
    }
}
