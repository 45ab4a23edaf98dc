package org.attn4j.samples.metrics;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;

import org.bytedeco.javacpp.Pointer;

/**
 * The peak resident memory of this process over a stretch of code, as the operating system counts it.
 *
 * <p>Resident memory rather than ND4J's own counters because ND4J 1.0.0-M2.1 allocates its buffers (and
 * libnd4j its temporaries, such as the N x N matrix of the stock attention op) outside javacpp's
 * {@code Pointer.totalBytes()}, which stays at a few kilobytes; only the resident set sees them all.
 *
 * <p>On Linux the kernel's own high-water mark is used: writing {@code 5} to {@code /proc/self/clear_refs}
 * resets {@code VmHWM} to the current resident size and {@code VmHWM} is read at the end, so no short
 * peak is missed. Where that is not possible, a daemon thread samples javacpp's
 * {@code Pointer.physicalBytes()} every millisecond.
 *
 * <p>Both count the whole JVM process (heap, native libraries, every live ND4J buffer); a {@link Reading}
 * gives the peak and the resident size at the start, whose difference is what the code added.
 */
public final class PeakMemory {

    private static final Path STATUS = Path.of("/proc/self/status");
    private static final Path CLEAR_REFS = Path.of("/proc/self/clear_refs");
    private static final String HWM_MEASURE = "peak resident set size of the JVM process (Linux VmHWM from "
            + "/proc/self/status, reset through /proc/self/clear_refs at the start)";
    private static final String SAMPLED_MEASURE = "peak resident set size of the JVM process, sampled every "
            + "1 ms (javacpp Pointer.physicalBytes())";

    private final long baseline;
    private final boolean kernelPeak;
    private final AtomicLong sampledPeak = new AtomicLong();
    private final Thread sampler;
    private volatile boolean running = true;

    private PeakMemory() {
        this.kernelPeak = resetKernelPeak();
        // The baseline must come from the same counter as the peak: javacpp's physicalBytes() leaves out
        // shared pages (about 40 MB of mapped libraries here) and so reads lower than VmRSS / VmHWM.
        this.baseline = kernelPeak ? readStatusKb("VmRSS") * 1024 : residentBytes();
        sampledPeak.set(baseline);
        if (kernelPeak) {
            sampler = null;
        } else {
            sampler = new Thread(this::sample, "attn4j-peak-memory");
            sampler.setDaemon(true);
            sampler.start();
        }
    }

    /** Starts measuring now; the resident size at this moment is the baseline. */
    public static PeakMemory start() {
        return new PeakMemory();
    }

    /**
     * Frees what can be freed before a baseline: runs the garbage collector and waits briefly, so ND4J
     * buffers that are already unreachable are released (ND4J frees native memory when their Java owners
     * are collected), then asks glibc to hand freed heap memory back to the system ({@code malloc_trim}).
     * Without the trim, memory freed by an earlier run stays resident and is silently reused by the next,
     * which would then show a smaller rise than it really needs.
     */
    public static void collectGarbage() {
        System.gc();
        try {
            Thread.sleep(50);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        MallocTrim.trim();
    }

    /** What {@link #start()} measures on this machine, for reports. */
    public static String measure() {
        return resetKernelPeak() ? HWM_MEASURE : SAMPLED_MEASURE;
    }

    /** The resident set size of this process now, in bytes, without shared pages (javacpp's count). */
    public static long residentBytes() {
        return Pointer.physicalBytes();
    }

    /** Stops measuring and returns the baseline and the peak. */
    public Reading stop() {
        running = false;
        long peak;
        if (kernelPeak) {
            peak = Math.max(readStatusKb("VmHWM") * 1024, baseline);
        } else {
            try {
                sampler.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            peak = Math.max(sampledPeak.get(), residentBytes());
        }
        return new Reading(baseline, peak, kernelPeak ? HWM_MEASURE : SAMPLED_MEASURE);
    }

    private void sample() {
        while (running) {
            sampledPeak.accumulateAndGet(residentBytes(), Math::max);
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private static boolean resetKernelPeak() {
        try {
            Files.writeString(CLEAR_REFS, "5", StandardCharsets.US_ASCII);
            return readStatusKb("VmHWM") > 0;
        } catch (IOException | SecurityException | UnsupportedOperationException e) {
            return false;
        }
    }

    /**
     * The highest resident set size of this process since it started (Linux {@code VmHWM}, what
     * {@code getrusage}'s {@code ru_maxrss} reports), in bytes; -1 where the kernel does not say.
     */
    public static long processPeakBytes() {
        long kb = readStatusKb("VmHWM");
        return kb < 0 ? -1 : kb * 1024;
    }

    static long readStatusKb(String key) {
        try {
            for (String line : Files.readAllLines(STATUS, StandardCharsets.US_ASCII)) {
                if (line.startsWith(key + ":")) {
                    return Long.parseLong(line.substring(key.length() + 1).replace("kB", "").strip());
                }
            }
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }

    /**
     * One measurement.
     *
     * @param baselineBytes resident bytes when measuring started
     * @param peakBytes     highest resident bytes while measuring
     * @param measure       what was measured, for reports
     */
    public record Reading(long baselineBytes, long peakBytes, String measure) {
        /** How far the peak rose above the baseline, in bytes (never negative). */
        public long increaseBytes() {
            return Math.max(0, peakBytes - baselineBytes);
        }
    }
}
