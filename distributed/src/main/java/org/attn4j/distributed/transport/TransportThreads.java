package org.attn4j.distributed.transport;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The JVM-wide threads every transport shares: one timer for call deadlines, and a cached pool on which futures
 * complete. Futures are never completed on a transport's network threads: a continuation that computes or
 * blocks would otherwise stop the polling that delivers the message it may be waiting for. A cached pool (not a
 * fixed one) because continuations may block on other futures of the same transport.
 */
final class TransportThreads {

    private static final ExecutorService COMPLETER = Executors.newCachedThreadPool(daemon("attn4j-completion"));
    private static final ScheduledThreadPoolExecutor TIMER = newTimer();

    private TransportThreads() {
    }

    /** Where futures complete. */
    static Executor completer() {
        return COMPLETER;
    }

    /**
     * Runs {@code task} (the completion of a future) on {@code executor}, or on {@link #completer()} when the
     * executor refuses it (shut down): a future must complete somewhere, or its caller would wait forever.
     */
    static void complete(Executor executor, Runnable task) {
        try {
            executor.execute(task);
        } catch (RejectedExecutionException e) {
            COMPLETER.execute(task);
        }
    }

    /**
     * {@code f} as it is when already complete, else a future that completes as {@code f} does, on
     * {@code executor} (see {@link #complete}).
     */
    static <T> CompletableFuture<T> handOff(CompletableFuture<T> f, Executor executor) {
        if (f.isDone()) {
            return f;
        }
        CompletableFuture<T> handed = new CompletableFuture<>();
        f.whenComplete((v, e) -> complete(executor, () -> {
            if (e != null) {
                handed.completeExceptionally(e);
            } else {
                handed.complete(v);
            }
        }));
        return handed;
    }

    /** Where deadlines fire; its tasks must only hand work to {@link #completer()}. */
    static ScheduledExecutorService timer() {
        return TIMER;
    }

    /** Daemon threads named {@code prefix-N}: a transport the user forgets to close must not keep the JVM alive. */
    static ThreadFactory daemon(String prefix) {
        AtomicInteger count = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, prefix + "-" + count.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    private static ScheduledThreadPoolExecutor newTimer() {
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, daemon("attn4j-transport-timer"));
        // Most deadlines are cancelled because the message arrived; keep the queue from holding them.
        t.setRemoveOnCancelPolicy(true);
        return t;
    }
}
