package org.attn4j.samples.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * ND4J's float32 gemm rate on this machine, measured in the benchmark's own run so the floor it defines
 * reflects the same threads, libraries and neighbours.
 *
 * <p>Two rates: one Java thread, and one gemm per core in parallel Java threads. The floor uses the better
 * one ({@link #best()}), normally the second: the attention op splits its work over Java threads with one
 * OpenMP / OpenBLAS thread each (the threading policy), so all cores are what it competes with.
 *
 * @param size           the square size {@code s} of the {@code s x s x s} products
 * @param oneThread      flop/s of one thread (2 s^3 per product), median of the rounds
 * @param allThreads     flop/s of {@code threads} threads together, median of the rounds
 * @param threads        threads in the parallel measurement ({@code availableProcessors})
 */
public record GemmRate(int size, double oneThread, double allThreads, int threads) {

    private static final int WARMUP_ROUNDS = 2;
    private static final int ROUNDS = 5;

    /**
     * Measures both rates with {@code size^3} float32 products.
     *
     * @param size matrix size, e.g. 1024
     */
    public static GemmRate measure(int size) {
        return measure(size, DataType.FLOAT);
    }

    /** {@link #measure(int)} with products of {@code type}, float32 or float64. */
    public static GemmRate measure(int size, DataType type) {
        int threads = Runtime.getRuntime().availableProcessors();
        double flops = 2.0 * size * size * size;
        double one = flops / medianSeconds(size, 1, type);
        double all = threads * flops / medianSeconds(size, threads, type);
        return new GemmRate(size, one, all, threads);
    }

    /**
     * The rate the floor uses: the higher of the two, so the floor stays a lower bound on time even when
     * neighbours on a shared machine slow the parallel measurement below the single-thread one.
     */
    public double best() {
        return Math.max(oneThread, allThreads);
    }

    private static double medianSeconds(int size, int threads, DataType type) {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Callable<INDArray>> products = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                INDArray a = Nd4j.rand(type, size, size);
                INDArray b = Nd4j.rand(type, size, size);
                INDArray c = Nd4j.create(type, size, size);
                products.add(() -> Nd4j.gemm(a, b, c, false, false, 1.0, 0.0));
            }
            double[] seconds = new double[ROUNDS];
            for (int r = -WARMUP_ROUNDS; r < ROUNDS; r++) {
                long t0 = System.nanoTime();
                for (Future<INDArray> f : pool.invokeAll(products)) {
                    f.get();
                }
                if (r >= 0) {
                    seconds[r] = (System.nanoTime() - t0) / 1e9;
                }
            }
            return median(seconds);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("GemmRate: interrupted", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("GemmRate: gemm failed: " + e.getCause(), e.getCause());
        } finally {
            pool.shutdownNow();
        }
    }

    /** The median of the values (mean of the middle two for an even count). */
    static double median(double[] values) {
        double[] v = values.clone();
        Arrays.sort(v);
        int m = v.length / 2;
        return v.length % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
    }
}
