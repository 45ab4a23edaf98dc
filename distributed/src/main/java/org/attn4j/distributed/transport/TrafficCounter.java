package org.attn4j.distributed.transport;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/** Payload bytes sent by one rank, per peer and per tag; thread-safe. */
public final class TrafficCounter {

    private final ConcurrentHashMap<Integer, LongAdder> perPeer = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Integer, LongAdder> perTag = new ConcurrentHashMap<>();
    private final LongAdder total = new LongAdder();

    /** Records {@code bytes} sent to {@code peer} under {@code tag}. */
    public void record(int peer, int tag, long bytes) {
        perPeer.computeIfAbsent(peer, p -> new LongAdder()).add(bytes);
        perTag.computeIfAbsent(tag, t -> new LongAdder()).add(bytes);
        total.add(bytes);
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
        total.reset();
    }
}
