package org.attn4j.distributed.transport;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * Payload bytes sent by one rank, per peer, per tag and per (peer, tag); thread-safe. Payload bytes are the
 * arrays' element bytes (length times element width), not headers, heartbeats or retransmissions, so the counts
 * can be held against the papers' communication-volume formulas. Transports do not count sends to self.
 */
public final class TrafficCounter {

    private final ConcurrentHashMap<Integer, LongAdder> perPeer = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, LongAdder> perTag = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, LongAdder> perPeerAndTag = new ConcurrentHashMap<>();
    private final LongAdder total = new LongAdder();

    /** Records {@code bytes} sent to {@code peer} under {@code tag}. */
    public void record(int peer, int tag, long bytes) {
        perPeer.computeIfAbsent(peer, p -> new LongAdder()).add(bytes);
        perTag.computeIfAbsent(tag, t -> new LongAdder()).add(bytes);
        perPeerAndTag.computeIfAbsent(key(peer, tag), k -> new LongAdder()).add(bytes);
        total.add(bytes);
    }

    /** Bytes sent to {@code peer} under {@code tag}. */
    public long toPeerWithTag(int peer, int tag) {
        LongAdder a = perPeerAndTag.get(key(peer, tag));
        return a == null ? 0 : a.sum();
    }

    private static long key(int peer, int tag) {
        return ((long) peer << 32) | (tag & 0xFFFF_FFFFL);
    }

    /** All bytes sent. */
    public long total() {
        return total.sum();
    }

    /** Bytes sent to {@code peer}. */
    public long toPeer(int peer) {
        LongAdder a = perPeer.get(peer);
        return a == null ? 0 : a.sum();
    }

    /** Bytes sent under {@code tag}. */
    public long withTag(int tag) {
        LongAdder a = perTag.get(tag);
        return a == null ? 0 : a.sum();
    }

    /** A snapshot of bytes per tag. */
    public Map<Integer, Long> perTag() {
        Map<Integer, Long> m = new java.util.TreeMap<>();
        perTag.forEach((k, v) -> m.put(k, v.sum()));
        return m;
    }

    /** Zeroes every count (between phases of a measurement). */
    public void reset() {
        perPeer.clear();
        perTag.clear();
        perPeerAndTag.clear();
        total.reset();
    }
}
