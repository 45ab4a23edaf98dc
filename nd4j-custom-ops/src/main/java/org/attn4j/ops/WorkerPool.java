package org.attn4j.ops;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;
import java.util.function.IntFunction;
import java.util.function.Supplier;

/**
 * Runs independent work items over a few Java threads, each with its own per-thread state (a kernel
 * owning its tile buffers). Items are handed out one at a time from a shared counter, so uneven items
 * (causal tiles) balance. The threads are daemons shared by every op in the process.
 */
public final class WorkerPool {

    private static final int CORES = Runtime.getRuntime().availableProcessors();
    private static final ExecutorService POOL = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "attn4j-worker");
        t.setDaemon(true);
        return t;
    });

    private WorkerPool() {
    }

    /** Threads to use for {@code items} work items when {@code requested} were asked for (0 = per core). */
    public static int workers(int requested, int items) {
        int t = requested > 0 ? requested : CORES;
        return Math.max(1, Math.min(t, items));
    }

    /** As {@link #run(int, int, IntFunction, BiConsumer)} with the same state factory for every worker. */
    public static <S> void run(int requested, int items, Supplier<S> state, BiConsumer<S, Integer> work) {
        run(workers(requested, items), items, w -> state.get(), work);
    }

    /**
     * Runs {@code work(state, item)} for every item in {@code [0, items)}.
     *
     * @param workers threads to use (at most items; 1 runs on the caller's thread)
     * @param state   per-worker state, built on the worker's own thread from its index
     * @throws RuntimeException the first exception any item threw, unwrapped
     */
    public static <S> void run(int workers, int items, IntFunction<S> state, BiConsumer<S, Integer> work) {
        AtomicInteger next = new AtomicInteger();
        if (workers <= 1 || items <= 1) {
            S st = state.apply(0);
            for (int i = 0; i < items; i++) {
                work.accept(st, i);
            }
            return;
        }
        List<Future<?>> futures = new ArrayList<>(workers);
        for (int w = 0; w < workers; w++) {
            int index = w;
            futures.add(POOL.submit(() -> {
                S st = state.apply(index);
                for (int i = next.getAndIncrement(); i < items; i = next.getAndIncrement()) {
                    work.accept(st, i);
                }
            }));
        }
        RuntimeException failure = null;
        for (Future<?> f : futures) {
            try {
                f.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                next.set(items);
                failure = failure != null ? failure : new IllegalStateException("WorkerPool: interrupted", e);
            } catch (ExecutionException e) {
                next.set(items);
                Throwable c = e.getCause();
                if (failure == null) {
                    failure = c instanceof RuntimeException re ? re : new IllegalStateException(c);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }
}
