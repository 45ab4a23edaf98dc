package org.attn4j.distributed.launch;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Starts P worker JVMs on this machine and watches them: the way to run a distributed job on one host.
 *
 * <p>Each worker runs {@code mainClass args} with this JVM's {@code java} and class path, the module flags the
 * project needs ({@link #JVM_FLAGS}), {@code -Xmx} of {@link Builder#heap}, the builder's {@link Builder#jvmArgs},
 * then the flags in the environment variable {@value #WORKER_JAVA_OPTS} (split at white space; later flags win, so
 * they override the builder's), and the environment of this process
 * plus the {@link WorkerEnvironment} variables: its rank, the world size, peers {@code 127.0.0.1:port} on free
 * UDP ports, and a fresh random job token; {@code OMP_NUM_THREADS} and {@code OPENBLAS_NUM_THREADS} are 1 (the
 * workers share the cores). Every line a worker prints is passed on with a {@code [rank r] } prefix. With
 * {@code ATTN4J_WORKER_CDS_DIR} set, the workers share a class-data archive kept there ({@link ClassArchive}), and
 * start faster once it exists.
 *
 * <p>When a worker exits non-zero, the others get {@link Builder#stopGrace} to exit by themselves (their
 * transports notice the dead peer within their timeout and say so), then the launcher stops them (SIGTERM, and
 * SIGKILL {@link #KILL_AFTER} later). The launch returns the exit code of the first failure. A global
 * {@link Builder#timeout} stops every worker and returns {@link #EXIT_TIMEOUT}. If this JVM is shut down, a
 * shutdown hook stops the workers.
 */
public final class LocalLauncher {

    /** The flags every worker JVM gets: the Vector API module, and what Agrona (Aeron) needs on Java 17. */
    public static final List<String> JVM_FLAGS = List.of("--add-modules", "jdk.incubator.vector",
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED");
    /**
     * Environment variable with extra JVM flags for every worker, after the builder's own: for example
     * {@code -XX:TieredStopAtLevel=1}, which starts short-lived workers faster (the test suite sets it).
     */
    public static final String WORKER_JAVA_OPTS = "ATTN4J_WORKER_JAVA_OPTS";
    /** The exit code of a launch stopped by its global timeout (as coreutils' {@code timeout}). */
    public static final int EXIT_TIMEOUT = 124;
    /** How long a worker has between SIGTERM and SIGKILL. */
    public static final Duration KILL_AFTER = Duration.ofSeconds(5);

    /** The JVM's notice on stderr that the incubator module is used: one per worker, and no news. */
    private static final String INCUBATOR_NOTICE = "WARNING: Using incubator modules: jdk.incubator.vector";
    private static final Logger LOG = LoggerFactory.getLogger(LocalLauncher.class);

    private final Builder b;

    private LocalLauncher(Builder b) {
        this.b = b;
    }

    /**
     * A launcher of {@code workers} processes running {@code mainClass}.
     *
     * @param workers   P, {@code >= 1}
     * @param mainClass the class whose {@code main} each worker runs
     */
    public static Builder builder(int workers, String mainClass) {
        return new Builder(workers, mainClass);
    }

    /** A fresh job token: 128 random bits as 32 hex digits. */
    public static String newJobToken() {
        byte[] bytes = new byte[16];
        new SecureRandom().nextBytes(bytes);
        return HexFormat.of().formatHex(bytes);
    }

    /**
     * Starts the workers, streams their output, and waits until all have exited.
     *
     * @return how it ended
     * @throws IOException          if a worker could not be started (the others are stopped)
     * @throws InterruptedException if this thread is interrupted while waiting (the workers are stopped)
     */
    public LaunchResult run() throws IOException, InterruptedException {
        int p = b.workers;
        int[] ports = b.ports != null ? b.ports : b.scheduler != null ? null : FreePorts.udp(p);
        String token = newJobToken();
        List<Process> processes = new CopyOnWriteArrayList<>();
        List<Thread> pumps = new ArrayList<>();
        BlockingQueue<Integer> exits = new LinkedBlockingQueue<>();
        Thread hook = new Thread(() -> processes.forEach(Process::destroyForcibly), "attn4j-launcher-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        long start = System.nanoTime();
        java.util.Optional<ClassArchive> archive = ClassArchive.of(b.classPath, b.classArchiveDir,
                ClassArchive.ENOUGH_CLASSES);
        try {
            for (int r = 0; r < p; r++) {
                Process proc = start(r, ports, token, archive);
                processes.add(proc);
                pumps.add(pump(proc.getInputStream(), r, b.stdout));
                pumps.add(pump(proc.getErrorStream(), r, b.stderr));
                int rank = r;
                proc.onExit().thenRun(() -> exits.add(rank));
            }
            LOG.info("started {} workers of {} ({})", p, b.mainClass, ports != null ? "ports "
                    + java.util.Arrays.toString(ports) : "scheduler variables");
            LaunchResult result = watch(processes, exits, start);
            for (Thread t : pumps) {
                t.join(TimeUnit.SECONDS.toMillis(5));
            }
            archive.ifPresent(ClassArchive::afterLaunch);
            return result;
        } catch (IOException | InterruptedException | RuntimeException e) {
            stop(processes, new boolean[p]);
            throw e;
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException shuttingDown) {
                // The hook is running or about to: it stops the workers.
            }
        }
    }

    private Process start(int rank, int[] ports, String token, java.util.Optional<ClassArchive> archive)
            throws IOException {
        List<String> cmd = new ArrayList<>(b.prefix.apply(rank));
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Xmx" + b.heap);
        cmd.addAll(JVM_FLAGS);
        cmd.addAll(b.jvmArgs);
        cmd.addAll(workerJavaOptions(System.getenv(WORKER_JAVA_OPTS)));
        archive.ifPresent(a -> cmd.addAll(a.flags(rank)));
        cmd.add("-cp");
        cmd.add(archive.map(ClassArchive::classPath).orElse(b.classPath));
        cmd.add(b.mainClass);
        cmd.addAll(b.args);
        ProcessBuilder pb = new ProcessBuilder(cmd);
        Map<String, String> env = pb.environment();
        env.put("OMP_NUM_THREADS", "1");
        env.put("OPENBLAS_NUM_THREADS", "1");
        ALLOCATOR_ENV.forEach(env::putIfAbsent);
        if (b.scheduler != null) {                         // as a scheduler would: its variables, no peer list
            env.remove(WorkerEnvironment.RANK);
            env.remove(WorkerEnvironment.WORLD_SIZE);
            env.remove(WorkerEnvironment.PEERS);
            env.putAll(b.scheduler.apply(rank));
        } else {
            StringBuilder peers = new StringBuilder();
            for (int port : ports) {
                peers.append(peers.length() == 0 ? "" : ",").append("127.0.0.1:").append(port);
            }
            env.put(WorkerEnvironment.RANK, Integer.toString(rank));
            env.put(WorkerEnvironment.WORLD_SIZE, Integer.toString(b.workers));
            env.put(WorkerEnvironment.PEERS, peers.toString());
        }
        env.put(WorkerEnvironment.JOB_TOKEN, token);
        env.putAll(b.env);
        env.putAll(b.rankEnv.getOrDefault(rank, Map.of()));
        return pb.start();
    }

    /**
     * glibc allocator settings every worker gets unless this process's environment sets them: arrays under
     * 32 MiB come from the heap instead of a fresh mmap each, and up to 32 MiB of freed memory stay with the
     * process. ND4J allocates every array (a received message's among them) with malloc; with glibc's defaults a
     * large block freed goes back to the kernel and the next one faults its pages in again, which put the ring
     * collectives at a third of their speed (docs/distributed.md, "The transport").
     */
    public static final Map<String, String> ALLOCATOR_ENV = Map.of(
            "MALLOC_MMAP_THRESHOLD_", Integer.toString(32 << 20),
            "MALLOC_TRIM_THRESHOLD_", Integer.toString(32 << 20));

    /** The flags of {@value #WORKER_JAVA_OPTS}: none when it is unset or blank. */
    static List<String> workerJavaOptions(String value) {
        if (value == null || value.isBlank()) {
            return List.of();
        }
        return List.of(value.strip().split("\\s+"));
    }

    /** Copies a worker's stream line by line to {@code sink} with the rank prefix, on a daemon thread. */
    private static Thread pump(InputStream in, int rank, Consumer<String> sink) {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (!line.equals(INCUBATOR_NOTICE)) {
                        sink.accept("[rank " + rank + "] " + line);
                    }
                }
            } catch (IOException e) {
                LOG.debug("output of rank {} ended: {}", rank, e.toString());
            }
        }, "attn4j-launcher-output-" + rank);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** Waits for every exit, stopping the others after the first failure's grace, or all at the timeout. */
    private LaunchResult watch(List<Process> processes, BlockingQueue<Integer> exits, long start)
            throws InterruptedException {
        int p = processes.size();
        int[] codes = new int[p];
        boolean[] stopped = new boolean[p];
        int firstFailed = -1;
        boolean timedOut = false;
        long deadline = b.timeout == null ? Long.MAX_VALUE : start + b.timeout.toNanos();
        long stopAt = Long.MAX_VALUE;
        int remaining = p;
        while (remaining > 0) {
            long wait = Math.min(deadline, stopAt) - System.nanoTime();
            Integer rank = wait > 0 ? exits.poll(wait, TimeUnit.NANOSECONDS) : null;
            if (rank != null) {
                remaining--;
                codes[rank] = processes.get(rank).exitValue();
                if (codes[rank] != 0 && firstFailed < 0 && !timedOut && !stopped[rank]) {
                    firstFailed = rank;
                    stopAt = System.nanoTime() + b.stopGrace.toNanos();
                    LOG.warn("rank {} exited with {}; stopping the other workers {} ms from now unless they exit",
                            rank, codes[rank], b.stopGrace.toMillis());
                }
            } else if (System.nanoTime() >= deadline && !timedOut) {
                timedOut = firstFailed < 0;
                LOG.warn("global timeout of {} s: stopping every worker", b.timeout.toSeconds());
                stop(processes, stopped);
                stopAt = Long.MAX_VALUE;
                deadline = Long.MAX_VALUE;
            } else if (System.nanoTime() >= stopAt) {
                stop(processes, stopped);
                stopAt = Long.MAX_VALUE;
            }
        }
        int code = firstFailed >= 0 ? codes[firstFailed] : timedOut ? EXIT_TIMEOUT : 0;
        return new LaunchResult(code, firstFailed, codes, stopped, timedOut,
                Duration.ofNanos(System.nanoTime() - start));
    }

    /** SIGTERM to every live worker, SIGKILL to those still alive {@link #KILL_AFTER} later. */
    private static void stop(List<Process> processes, boolean[] stopped) throws InterruptedException {
        for (int r = 0; r < processes.size(); r++) {
            if (processes.get(r).isAlive()) {
                stopped[r] = true;
                processes.get(r).destroy();
            }
        }
        long killAt = System.nanoTime() + KILL_AFTER.toNanos();
        for (Process proc : processes) {
            long left = killAt - System.nanoTime();
            if (left <= 0 || !proc.waitFor(left, TimeUnit.NANOSECONDS)) {
                proc.destroyForcibly();
            }
        }
    }

    /** Options of a local launch. */
    public static final class Builder {
        private final int workers;
        private final String mainClass;
        private List<String> args = List.of();
        private String heap = "2g";
        private List<String> jvmArgs = List.of();
        private String classPath = System.getProperty("java.class.path");
        private String classArchiveDir = System.getenv(ClassArchive.DIR);
        private Duration timeout;
        private Duration stopGrace = Duration.ofSeconds(10);
        private final Map<String, String> env = new LinkedHashMap<>();
        private final Map<Integer, Map<String, String>> rankEnv = new HashMap<>();
        private int[] ports;
        private java.util.function.IntFunction<Map<String, String>> scheduler;
        private java.util.function.IntFunction<List<String>> prefix = rank -> List.of();
        private Consumer<String> stdout = line -> LOG.info("{}", line);
        private Consumer<String> stderr = line -> LOG.warn("{}", line);

        private Builder(int workers, String mainClass) {
            if (workers < 1) {
                throw new IllegalArgumentException("LocalLauncher: workers must be >= 1, got " + workers);
            }
            if (mainClass == null || mainClass.isBlank()) {
                throw new IllegalArgumentException("LocalLauncher: a main class is required, got "
                        + (mainClass == null ? "null" : "\"" + mainClass + "\""));
            }
            this.workers = workers;
            this.mainClass = mainClass;
        }

        /** The arguments of each worker's {@code main}. */
        public Builder args(List<String> args) {
            this.args = List.copyOf(args);
            return this;
        }

        /** Each worker's maximum Java heap, as {@code -Xmx} takes it (default "2g"; ND4J's arrays live off-heap). */
        public Builder heap(String xmx) {
            if (xmx == null || !xmx.matches("[0-9]+[kKmMgG]?")) {
                throw new IllegalArgumentException("LocalLauncher: heap must look like 512m or 2g, got " + xmx);
            }
            this.heap = xmx;
            return this;
        }

        /** More JVM flags for each worker, after the built-in ones. */
        public Builder jvmArgs(List<String> flags) {
            this.jvmArgs = List.copyOf(flags);
            return this;
        }

        /**
         * Where the workers' class-data archive is kept ({@link ClassArchive}; default: the directory
         * {@code ATTN4J_WORKER_CDS_DIR} names, if any); null for none.
         */
        public Builder classArchiveDir(Path dir) {
            this.classArchiveDir = dir == null ? null : dir.toString();
            return this;
        }

        /** The workers' class path (default: this JVM's). */
        public Builder classPath(String classPath) {
            this.classPath = Objects.requireNonNull(classPath, "classPath");
            return this;
        }

        /** Stop everything after this long (default: no limit). */
        public Builder timeout(Duration timeout) {
            if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
                throw new IllegalArgumentException("LocalLauncher: timeout must be positive, got " + timeout);
            }
            this.timeout = timeout;
            return this;
        }

        /** After the first failure, how long the others may take to exit by themselves (default 10 s). */
        public Builder stopGrace(Duration grace) {
            if (grace.isNegative()) {
                throw new IllegalArgumentException("LocalLauncher: stop grace must be >= 0, got " + grace);
            }
            this.stopGrace = grace;
            return this;
        }

        /** An environment variable for every worker (overrides the launcher's own, e.g. OMP_NUM_THREADS). */
        public Builder env(String name, String value) {
            env.put(name, value);
            return this;
        }

        /** An environment variable for one worker only (e.g. a device to use); applied last. */
        public Builder rankEnv(int rank, String name, String value) {
            if (rank < 0 || rank >= workers) {
                throw new IllegalArgumentException("LocalLauncher: rank must be in [0, " + workers + "), got " + rank);
            }
            rankEnv.computeIfAbsent(rank, r -> new LinkedHashMap<>()).put(name, value);
            return this;
        }

        /** The workers' UDP ports by rank (default: free ports found at launch). */
        public Builder ports(int... ports) {
            if (ports.length != workers) {
                throw new IllegalArgumentException("LocalLauncher: " + ports.length + " ports for " + workers
                        + " workers");
            }
            this.ports = ports.clone();
            return this;
        }

        /**
         * Start the workers as torchrun does: {@code RANK}, {@code WORLD_SIZE}, {@code MASTER_ADDR} and
         * {@code MASTER_PORT} (and the job token), no peer list; rank 0 serves the rendezvous at
         * {@code host:port}, which must be one of its addresses.
         */
        public Builder rendezvous(String host, int port) {
            Objects.requireNonNull(host, "host");
            return scheduler(rank -> Map.of("RANK", Integer.toString(rank), "WORLD_SIZE", Integer.toString(workers),
                    "MASTER_ADDR", host, "MASTER_PORT", Integer.toString(port)));
        }

        /**
         * Start the workers with the variables a scheduler sets, by rank (e.g. Slurm's {@code SLURM_PROCID},
         * {@code SLURM_NTASKS} and {@code SLURM_JOB_NODELIST}) and the job token, instead of a peer list; they
         * meet at a rendezvous ({@link JobEnvironment}).
         */
        public Builder scheduler(java.util.function.IntFunction<Map<String, String>> variables) {
            if (ports != null) {
                throw new IllegalArgumentException("LocalLauncher: fixed ports and a rendezvous exclude each other");
            }
            this.scheduler = Objects.requireNonNull(variables, "variables");
            return this;
        }

        /**
         * Words put before each worker's {@code java} command, by rank: e.g. {@code ip netns exec NAME} to start
         * it in a network namespace (default: none).
         */
        public Builder prefix(java.util.function.IntFunction<List<String>> prefix) {
            this.prefix = Objects.requireNonNull(prefix, "prefix");
            return this;
        }

        /** Where the workers' prefixed stdout and stderr lines go (default: this class's slf4j logger). */
        public Builder output(Consumer<String> stdout, Consumer<String> stderr) {
            this.stdout = Objects.requireNonNull(stdout, "stdout");
            this.stderr = Objects.requireNonNull(stderr, "stderr");
            return this;
        }

        /** The launcher. */
        public LocalLauncher build() {
            return new LocalLauncher(this);
        }
    }
}
