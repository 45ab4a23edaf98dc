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

import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Runs independent work items over a few Java threads, each with its own per-thread state (a kernel
 * owning its tile buffers). Items are handed out one at a time from a shared counter, so uneven items
 * (causal tiles) balance. The threads are daemons shared by every op in the process.
 *
 * <p>While a run on several threads is under way, ND4J's own thread count (OpenMP and OpenBLAS) is
 * pinned to 1 and restored afterwards: nested native threads over-subscribe the cores. Measured on
 * this project's 2-core machine, flash forward at N=4096: 51 ms pinned against 137 ms with ND4J's
 * default threads (docs/threading.md).
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

    /**
     * Work below this many floating-point operations runs on the caller's thread: handing it to the pool costs
     * more than it saves. Pinning and restoring ND4J's native thread counts alone (see {@link NativeThreads}) takes
     * about 0.8 ms here, what one core does in ~10 MFLOP of small products; a decoding step (one query against a
     * cache of 8192 keys, 4 heads) took 0.86 ms on two threads and 0.44 ms on one.
     */
    public static final double SMALL_RUN_FLOPS = 1 << 24;

    /** Threads to use for {@code items} work items when {@code requested} were asked for (0 = per core). */
    public static int workers(int requested, int items) {
        int t = requested > 0 ? requested : CORES;
        return Math.max(1, Math.min(t, items));
    }

    /** As {@link #workers(int, int)}, but 1 for a run of fewer than {@link #SMALL_RUN_FLOPS} operations. */
    public static int workers(int requested, int items, double flops) {
        return flops < SMALL_RUN_FLOPS ? 1 : workers(requested, items);
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
        run(workers, items, state, work, true);
    }

    /**
     * As {@link #run(int, int, IntFunction, BiConsumer)}; {@code usesNativeThreads} false for work that calls
     * neither OpenBLAS nor multi-threaded ND4J ops (attn4j's native tile code): then ND4J's thread counts are left
     * as they are, which saves the pinning's cost (about 1 ms a run here when they are not 1 already).
     * {@code -Dattn4j.pinNativeThreads=true} or {@code false} pins always or never (to measure the policy).
     */
    public static <S> void run(int workers, int items, IntFunction<S> state, BiConsumer<S, Integer> work,
                               boolean usesNativeThreads) {
        AtomicInteger next = new AtomicInteger();
        if (workers <= 1 || items <= 1) {
            S st = state.apply(0);
            for (int i = 0; i < items; i++) {
                work.accept(st, i);
            }
            return;
        }
        // Set only to measure the policy (bench threading).
        String forced = System.getProperty("attn4j.pinNativeThreads");
        boolean pin = forced == null ? usesNativeThreads : Boolean.parseBoolean(forced);
        if (pin) {
            NativeThreads.pin();
        }
        try {
            runOnPool(workers, items, state, work, next);
        } finally {
            if (pin) {
                NativeThreads.unpin();
            }
        }
    }

    /**
     * Worker 0 runs on the caller's thread (outside any ND4J workspace, as on a pool thread), the others on the
     * pool: one thread hand-off fewer per run, and the caller, already running, starts at once. Measured with
     * empty items: ~50 us a run when every worker was a pool task.
     */
    private static <S> void runOnPool(int workers, int items, IntFunction<S> state, BiConsumer<S, Integer> work,
                                      AtomicInteger next) {
        List<Future<?>> futures = new ArrayList<>(workers - 1);
        for (int w = 1; w < workers; w++) {
            int index = w;
            futures.add(POOL.submit(() -> drain(state.apply(index), items, work, next)));
        }
        RuntimeException failure = null;
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            drain(state.apply(0), items, work, next);
        } catch (RuntimeException | Error e) {
            next.set(items);
            failure = e instanceof RuntimeException re ? re : new IllegalStateException(e);
        }
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

    private static <S> void drain(S st, int items, BiConsumer<S, Integer> work, AtomicInteger next) {
        for (int i = next.getAndIncrement(); i < items; i = next.getAndIncrement()) {
            work.accept(st, i);
        }
    }

    /**
     * Reference-counted pinning of ND4J's native thread counts to 1 while any pool run is active. Only
     * counts that are not 1 already are changed: {@code Blas.setMaxThreads} costs about 0.4 ms a call here
     * (measured), which would dominate small runs; under {@code OMP_NUM_THREADS=1} nothing is touched.
     */
    private static final class NativeThreads {
        private static int active;
        private static int savedThreads;
        private static int savedMaster;
        private static int savedBlas;

        static synchronized void pin() {
            if (active++ == 0) {
                var env = Nd4j.getEnvironment();
                var blas = Nd4j.factory().blas();
                savedThreads = env.maxThreads();
                savedMaster = env.maxMasterThreads();
                savedBlas = blas.getMaxThreads();
                if (savedThreads != 1) {
                    env.setMaxThreads(1);
                }
                if (savedMaster != 1) {
                    env.setMaxMasterThreads(1);
                }
                if (savedBlas != 1) {
                    blas.setMaxThreads(1);
                }
            }
        }

        static synchronized void unpin() {
            if (--active == 0) {
                var env = Nd4j.getEnvironment();
                if (savedThreads != 1) {
                    env.setMaxThreads(savedThreads);
                }
                if (savedMaster != 1) {
                    env.setMaxMasterThreads(savedMaster);
                }
                if (savedBlas != 1) {
                    Nd4j.factory().blas().setMaxThreads(savedBlas);
                }
            }
        }
    }
}
