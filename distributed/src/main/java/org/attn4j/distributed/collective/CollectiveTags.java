package org.attn4j.distributed.collective;

/**
 * Where collectives put their messages in the transport's tag space, so that they never meet user tags or
 * each other.
 *
 * <pre>
 *   tag: a non-negative int (31 bits)
 *
 *   0 .............. 2^24 - 1 | 2^24 ..................................................... 2^24 + 2^28 - 1
 *   user tags (point-to-point) | call tags:
 *                              |   2^24 + ((channel * WINDOW + call mod WINDOW) * PHASES + phase)
 *                              |     channel  0 .. 2^16 - 1  one per communicator that may run beside another
 *                              |     call     the communicator's call counter; WINDOW = 1024 calls in flight
 *                              |     phase    0 .. 3, a collective's sub-exchanges (allReduce: 0 = reduce-scatter,
 *                              |              1 = all-gather)
 *   2^24 + 2^28: failure notices between ranks ({@link #NOTICE_TAG})
 * </pre>
 *
 * <p>Messages are matched on (source, tag) in the order sent, so a tag may be reused once the call that used it
 * has completed on this rank: tags repeat every {@link #WINDOW} calls of a communicator, and a communicator
 * refuses to start a call while {@link #WINDOW} of its calls are still in flight. The bytes one channel sent are
 * the sum of {@link org.attn4j.distributed.transport.TrafficCounter#perTag()} over
 * {@link #first(int)} .. {@link #last(int)} ({@link #NOTICE_TAG} carries bytes only after a failure).
 */
public final class CollectiveTags {

    /** User tags are {@code 0 <= tag < USER_TAG_LIMIT}; collectives never use them. */
    public static final int USER_TAG_LIMIT = 1 << 24;
    /** Number of channels: independent communicators that may have calls in flight at the same time. */
    public static final int CHANNELS = 1 << 16;
    /** Calls of one communicator that may be in flight at once; tags repeat with this period. */
    public static final int WINDOW = 1024;
    /** Sub-exchanges per call, each with its own tag. */
    public static final int PHASES = 4;
    /** The tag on which ranks tell each other of a failed rank ({@code FailureNotices}), above every call tag. */
    public static final int NOTICE_TAG = USER_TAG_LIMIT + CHANNELS * WINDOW * PHASES;

    private CollectiveTags() {
    }

    /**
     * The tag of one phase of one call.
     *
     * @param channel the communicator's channel, {@code 0 <= channel < CHANNELS}
     * @param call    the communicator's call number (any non-negative value; taken modulo {@link #WINDOW})
     * @param phase   {@code 0 <= phase < PHASES}
     * @return the transport tag
     */
    public static int tag(int channel, long call, int phase) {
        checkChannel(channel);
        if (phase < 0 || phase >= PHASES) {
            throw new IllegalArgumentException("CollectiveTags: phase must be in [0, " + PHASES + "), got " + phase);
        }
        if (call < 0) {
            throw new IllegalArgumentException("CollectiveTags: call number must be >= 0, got " + call);
        }
        return USER_TAG_LIMIT + (int) ((channel * (long) WINDOW + call % WINDOW) * PHASES + phase);
    }

    /** The smallest tag of {@code channel}. */
    public static int first(int channel) {
        return tag(channel, 0, 0);
    }

    /** The largest tag of {@code channel}. */
    public static int last(int channel) {
        return tag(channel, WINDOW - 1, PHASES - 1);
    }

    /** Checks {@code 0 <= channel < CHANNELS}. */
    static void checkChannel(int channel) {
        if (channel < 0 || channel >= CHANNELS) {
            throw new IllegalArgumentException("Communicator: channel must be in [0, " + CHANNELS + "), got "
                    + channel);
        }
    }
}
