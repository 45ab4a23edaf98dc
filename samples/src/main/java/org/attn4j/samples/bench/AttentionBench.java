package org.attn4j.samples.bench;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;

import org.attn4j.ops.Kernel;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.samples.bench.BenchResult.Impl;
import org.attn4j.samples.bench.BenchResult.Pass;
import org.attn4j.samples.bench.BenchResult.Status;
import org.attn4j.samples.metrics.PeakMemory;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.DynamicCustomOp;
import org.nd4j.linalg.api.ops.impl.transforms.custom.DotProductAttention;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Times attn4j's {@link FlashAttention} against ND4J's stock {@code DotProductAttention} op and the gemm
 * floor (and, when asked, PyTorch's fused CPU kernel through {@link LibtorchAnchor}), for float32 or float64 inputs of B
 * sequences of H heads, over a doubling range of sequence lengths.
 *
 * <p>Each configuration is timed as the median of {@code repeats} runs after one untimed warm-up up to
 * {@code repeatMaxN}, and as a single run beyond, where a run takes seconds and the first one is already
 * warm (the smallest N warmed everything up). Memory is the peak rise of the process's resident set over
 * the warm-up and timed runs, above its size just before them with the inputs already allocated (see
 * {@link PeakMemory}).
 *
 * <p>The stock op materialises the N x N score matrix, so it is skipped above {@code stockMaxN} or when
 * that matrix would not fit in the available memory, and after its first failure; the reason is recorded.
 */
final class AttentionBench {

    /** Bytes of one float32 N x N score matrix, the stock op's dominant allocation, per N^2. */
    private static final double SCORE_BYTES_PER_ENTRY = Float.BYTES;
    /**
     * N x N float32 matrices the stock op holds at once, measured as its peak memory on this machine:
     * forward 1 (17 GB at N = 65536, DL4J-M2.1-FACTS.md), forward+backward 5 (335 MB at N = 4096).
     */
    private static final int STOCK_FORWARD_MATRICES = 1;
    private static final int STOCK_BACKWARD_MATRICES = 5;
    private static final long SEED = 42;

    private final Settings settings;
    private final PrintWriter log;
    private final FlashAttention flash = FlashAttention.defaults();
    private final Map<Pass, String> stockFailures = new EnumMap<>(Pass.class);

    /**
     * What to measure.
     *
     * @param minN         smallest N
     * @param maxN         largest N; N doubles from {@code minN} up to it
     * @param headDim      D
     * @param backwardMaxN above this N only the forward pass is timed
     * @param stockMaxN    above this N the stock op is skipped as known to need N^2 memory and time
     * @param repeats      timed runs per configuration up to {@code repeatMaxN}
     * @param repeatMaxN   above this N one timed run, no warm-up
     * @param gemmSize     size of the products that measure the gemm rate
     * @param batch        B
     * @param heads        H (keys and values have as many)
     * @param libtorch     the directory of the libtorch anchor to run beside attn4j at every N, or null
     * @param dataType     the inputs' type, float32 or float64
     * @param portable     whether the portable kernel is timed too
     * @param warmUpSeconds how long attn4j runs at the smallest N before anything is timed
     * @param settleSeconds how long each configuration's untimed runs last before its timed ones (up to
     *                      {@code repeatMaxN})
     */
    record Settings(int minN, int maxN, int headDim, int backwardMaxN, int stockMaxN, int repeats,
                    int repeatMaxN, int gemmSize, int batch, int heads, Path libtorch, DataType dataType,
                    boolean portable, double warmUpSeconds, double settleSeconds) {
        List<Integer> lengths() {
            List<Integer> ns = new ArrayList<>();
            for (long n = minN; n <= maxN; n *= 2) {
                ns.add((int) n);
            }
            return ns;
        }
    }

    AttentionBench(Settings settings, PrintWriter log) {
        this.settings = settings;
        this.log = log;
    }

    /** Runs every configuration, logging one line each, and returns the rows in a stable order. */
    List<BenchResult> run(GemmRate gemm) {
        warmUp();
        List<BenchResult> rows = new ArrayList<>();
        for (int n : settings.lengths()) {
            oursAt(n, rows);
            if (settings.libtorch() != null) {
                rows.addAll(new LibtorchAnchor(settings.libtorch(), log).run(n, settings.heads(),
                        n > settings.backwardMaxN()));
            }
            rows.add(logged(stock(n, Pass.FORWARD)));
            rows.add(logged(stock(n, Pass.FORWARD_BACKWARD)));
            for (boolean causal : new boolean[] {false, true}) {
                for (Pass pass : Pass.values()) {
                    rows.add(floor(n, causal, pass, gemm));
                }
            }
        }
        return rows;
    }

    private void oursAt(int n, List<BenchResult> rows) {
        Inputs in = Inputs.random(n, settings);
        for (boolean causal : new boolean[] {false, true}) {
            rows.add(logged(ours(in, causal, Pass.FORWARD)));
            rows.add(logged(ours(in, causal, Pass.FORWARD_BACKWARD)));
            if (settings.portable()) {
                rows.add(logged(portable(() -> ours(in, causal, Pass.FORWARD))));
                rows.add(logged(portable(() -> ours(in, causal, Pass.FORWARD_BACKWARD))));
            }
        }
        close(in.q, in.k, in.v, in.dO);
    }

    /** A row of attn4j's run with the portable kernel forced ({@code attn4j.kernel=portable}), as such. */
    private static BenchResult portable(java.util.function.Supplier<BenchResult> run) {
        String before = System.getProperty(Kernel.PROPERTY);
        System.setProperty(Kernel.PROPERTY, "portable");
        try {
            BenchResult r = run.get();
            return r == null ? null : new BenchResult(r.n(), Impl.PORTABLE, r.causal(), r.pass(), r.status(), r.medianMs(), r.repeats(),
                    r.peakIncreaseBytes(), r.note());
        } finally {
            if (before == null) {
                System.clearProperty(Kernel.PROPERTY);
            } else {
                System.setProperty(Kernel.PROPERTY, before);
            }
        }
    }

    /**
     * The stock op once, then attn4j for {@link Settings#warmUpSeconds} at the smallest N (every mask and pass), so the
     * JIT has compiled attn4j's Java tile code before anything is timed (native code needs no such warm-up).
     */
    private void warmUp() {
        // The stock op first: it runs ND4J's OpenMP and OpenBLAS threads on every core, and they keep spinning for
        // a while after it returns, which slowed attn4j's first timed configuration (N = 1024, full forward) from
        // about 1.2 to 2.8 ms when the stock op came last.
        StockInputs s = StockInputs.random(settings.minN(), settings);
        try {
            stockOnce(s, Pass.FORWARD_BACKWARD);
        } catch (RuntimeException e) {
            // Recorded when the measured run fails the same way.
        }
        close(s.q, s.k, s.v, s.dO);
        Inputs in = Inputs.random(settings.minN(), settings);
        long end = System.nanoTime() + (long) (settings.warmUpSeconds() * 1e9);
        do {
            for (boolean causal : new boolean[] {false, true}) {
                try {
                    oursOnce(in, causal, Pass.FORWARD_BACKWARD);
                    oursOnce(in, causal, Pass.FORWARD);
                    if (settings.portable()) {
                        portable(() -> {
                            oursOnce(in, causal, Pass.FORWARD_BACKWARD);
                            return null;
                        });
                    }
                } catch (RuntimeException e) {
                    // Recorded when the measured run fails the same way.
                    end = 0;
                }
            }
        } while (System.nanoTime() < end);
        close(in.q, in.k, in.v, in.dO);
    }

    private BenchResult ours(Inputs in, boolean causal, Pass pass) {
        if (pass == Pass.FORWARD_BACKWARD && in.n > settings.backwardMaxN()) {
            return BenchResult.notRun(in.n, Impl.ATTN4J, causal, pass, Status.SKIPPED,
                    "skipped: forward only beyond N = " + settings.backwardMaxN());
        }
        return timed(in.n, Impl.ATTN4J, causal, pass, () -> oursOnce(in, causal, pass));
    }

    private void oursOnce(Inputs in, boolean causal, Pass pass) {
        AttentionMask mask = causal ? AttentionMask.causal() : AttentionMask.none();
        double scale = FlashAttention.defaultScale(in.q.size(3));
        AttentionOutput out = flash.forward(in.q, in.k, in.v, mask, scale);
        if (pass == Pass.FORWARD_BACKWARD) {
            AttentionGradients g = flash.backward(in.q, in.k, in.v, out.output(), out.lse(), in.dO, mask, scale);
            close(g.dq(), g.dk(), g.dv());
        }
        close(out.output(), out.lse());
    }

    private BenchResult stock(int n, Pass pass) {
        if (pass == Pass.FORWARD_BACKWARD && n > settings.backwardMaxN()) {
            return BenchResult.notRun(n, Impl.STOCK, false, pass, Status.SKIPPED,
                    "skipped: forward only beyond N = " + settings.backwardMaxN());
        }
        int matrices = pass == Pass.FORWARD ? STOCK_FORWARD_MATRICES : STOCK_BACKWARD_MATRICES;
        double scoreBytes = SCORE_BYTES_PER_ENTRY * n * (double) n * matrices * settings.batch() * settings.heads();
        String needs = "needs ~" + bytes(scoreBytes) + " for "
                + (matrices == 1 ? "the N x N score matrix" : matrices + " N x N score matrices");
        if (n > settings.stockMaxN()) {
            return BenchResult.notRun(n, Impl.STOCK, false, pass, Status.SKIPPED, "skipped: " + needs
                    + " (above --stock-max-n " + settings.stockMaxN() + ")");
        }
        long available = MachineInfo.memAvailableBytes();
        // 1.25: the matrices plus the rest of the process must fit, or the kernel's OOM killer ends the run.
        if (available > 0 && scoreBytes * 1.25 > available) {
            return BenchResult.notRun(n, Impl.STOCK, false, pass, Status.SKIPPED, "skipped: " + needs + ", "
                    + bytes(available) + " available");
        }
        if (stockFailures.containsKey(pass)) {
            return BenchResult.notRun(n, Impl.STOCK, false, pass, Status.SKIPPED,
                    "skipped: " + stockFailures.get(pass));
        }
        StockInputs in = StockInputs.random(n, settings);
        BenchResult r = timed(n, Impl.STOCK, false, pass, () -> stockOnce(in, pass));
        close(in.q, in.k, in.v, in.dO);
        if (r.status() == Status.FAILED) {
            String failure = "failed at N = " + n + " " + pass.label();
            stockFailures.putIfAbsent(pass, failure);
            // Forward+backward includes the forward: where the forward fails, both do.
            if (pass == Pass.FORWARD) {
                stockFailures.putIfAbsent(Pass.FORWARD_BACKWARD, failure);
            }
        }
        return r;
    }

    /** The stock op in its own layout, [B, D, N] (features before time), so no transpose is timed. */
    private static void stockOnce(StockInputs in, Pass pass) {
        // The stock op parallelises inside libnd4j: give it every core (the launcher starts the process with
        // one native thread for attn4j's own policy), so it is measured at its best, not handicapped.
        var env = Nd4j.getEnvironment();
        var blas = Nd4j.factory().blas();
        int threads = env.maxThreads();
        int master = env.maxMasterThreads();
        int blasThreads = blas.getMaxThreads();
        int cores = Runtime.getRuntime().availableProcessors();
        env.setMaxThreads(cores);
        env.setMaxMasterThreads(cores);
        blas.setMaxThreads(cores);
        try {
            INDArray[] out = Nd4j.exec(new DotProductAttention(in.q, in.k, in.v, null, true, false));
            if (pass == Pass.FORWARD_BACKWARD) {
                DynamicCustomOp bp = DynamicCustomOp.builder("dot_product_attention_bp")
                        .addInputs(in.q, in.k, in.v, in.dO).addIntegerArguments(1).build();
                close(Nd4j.exec(bp));
            }
            close(out);
        } finally {
            env.setMaxThreads(threads);
            env.setMaxMasterThreads(master);
            blas.setMaxThreads(blasThreads);
        }
    }

    /**
     * The floor: {@code 4 N^2 D} multiply-add flops of the forward pass ({@code QK^T} and {@code PV}) at the
     * best measured gemm rate; the backward does 2.5 times the forward's products, so forward+backward is
     * 3.5 times that; a causal mask needs half the products.
     */
    private BenchResult floor(int n, boolean causal, Pass pass, GemmRate gemm) {
        double forwardMs = 4.0 * n * (double) n * settings.headDim() * settings.batch() * settings.heads()
                / gemm.best() * 1e3;
        double ms = forwardMs * (pass == Pass.FORWARD_BACKWARD ? 3.5 : 1.0) * (causal ? 0.5 : 1.0);
        return new BenchResult(n, Impl.FLOOR, causal, pass, Status.OK, ms, 0, -1, "");
    }

    /** Decimal units, as the facts file and {@code free} report them. */
    static String bytes(double b) {
        return b >= 1e8 ? String.format(Locale.ROOT, "%.1f GB", b / 1e9)
                : String.format(Locale.ROOT, b >= 1e6 ? "%.0f MB" : "%.2f MB", b / 1e6);
    }

    private BenchResult timed(int n, Impl impl, boolean causal, Pass pass, Runnable once) {
        boolean repeated = n <= settings.repeatMaxN();
        int repeats = repeated ? settings.repeats() : 1;
        double[] ms = new double[repeats];
        long peak;
        try {
            // The memory window opens before the warm-up: memory an op allocates once and keeps for later
            // calls (libnd4j caches some buffers) is part of what it needs and must not hide in the baseline.
            PeakMemory.collectGarbage();
            PeakMemory memory = PeakMemory.start();
            if (repeated) {
                // At least 500 ms of untimed runs: after the collection's pause the first few short runs were slow
                // (N = 1024 forward: 2.8 ms for the median of 3 right after one untimed run, 1.4 ms of 15), and
                // after 100 ms the JIT was still recompiling the worker pool's code on the second core in about
                // one process in three (-XX:+PrintCompilation), which left the pool's thread late and the N = 1024
                // forward at 2.1-2.3 ms instead of 1.2.
                long until = System.nanoTime() + (long) (settings.settleSeconds() * 1e9);
                do {
                    once.run();
                } while (System.nanoTime() < until);
            }
            for (int r = 0; r < repeats; r++) {
                // attn4j's runs go back to back, as the libtorch anchor times its runs and as a training loop calls
                // the op (they close what they allocate): a collection and a pause before each run left the cores
                // idle and the caches cold, adding 0.5-1 ms to a 1 ms forward pass at N = 1024 and up to 5 ms to
                // some at N = 4096 (measured here). The stock op's N x N intermediates are only freed by a
                // collection, so it gets one before each run, or its memory reading would count earlier runs'.
                if (impl == Impl.STOCK) {
                    PeakMemory.collectGarbage();
                }
                long t0 = System.nanoTime();
                once.run();
                ms[r] = (System.nanoTime() - t0) / 1e6;
            }
            peak = memory.stop().increaseBytes();
        } catch (RuntimeException | OutOfMemoryError e) {
            String message = String.valueOf(e.getMessage()).strip().replaceAll("\\s*\\R\\s*", " ");
            return BenchResult.notRun(n, impl, causal, pass, Status.FAILED,
                    "failed: " + e.getClass().getSimpleName() + ": " + message);
        }
        return BenchResult.ok(n, impl, causal, pass, GemmRate.median(ms), repeats, peak);
    }

    private BenchResult logged(BenchResult r) {
        if (r.status() == Status.OK) {
            log.printf(Locale.ROOT, "N=%-6d %-10s %-6s %-7s %10.1f ms  peak +%.1f MB (%d run%s)%n", r.n(),
                    r.impl().label(), r.causal() ? "causal" : "full", r.pass().label(), r.medianMs(),
                    r.peakIncreaseBytes() / 1e6, r.repeats(), r.repeats() == 1 ? "" : "s");
        } else {
            log.printf(Locale.ROOT, "N=%-6d %-10s %-6s %-7s %s%n", r.n(), r.impl().label(),
                    r.causal() ? "causal" : "full", r.pass().label(), r.note());
        }
        log.flush();
        return r;
    }

    /** Frees ND4J buffers now rather than at the next GC, so memory readings of later runs stay clean. */
    private static void close(INDArray... arrays) {
        for (INDArray a : arrays) {
            if (a != null && a.closeable()) {
                a.close();
            }
        }
    }

    /** Seeded inputs of the settings' type in attn4j's layout [B, H, N, D]. */
    private record Inputs(int n, INDArray q, INDArray k, INDArray v, INDArray dO) {
        static Inputs random(int n, Settings s) {
            Nd4j.getRandom().setSeed(SEED + n);
            long[] shape = {s.batch(), s.heads(), n, s.headDim()};
            DataType t = s.dataType();
            return new Inputs(n, Nd4j.randn(t, shape), Nd4j.randn(t, shape), Nd4j.randn(t, shape),
                    Nd4j.randn(t, shape));
        }
    }

    /** Seeded inputs in the stock op's layout, [B, D, N] for one head, [B, H, D, N] for several. */
    private record StockInputs(INDArray q, INDArray k, INDArray v, INDArray dO) {
        static StockInputs random(int n, Settings s) {
            Nd4j.getRandom().setSeed(SEED + n);
            long[] shape = s.heads() == 1 ? new long[] {s.batch(), s.headDim(), n}
                    : new long[] {s.batch(), s.heads(), s.headDim(), n};
            DataType t = s.dataType();
            return new StockInputs(Nd4j.randn(t, shape), Nd4j.randn(t, shape), Nd4j.randn(t, shape),
                    Nd4j.randn(t, shape));
        }
    }
}
