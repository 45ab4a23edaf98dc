package org.attn4j.distributed.launch;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * What a worker process knows once it can start its transport: its rank, the world size, every rank's UDP
 * endpoint, the job token and the optional settings. {@link #from} reads them from the variables a scheduler sets
 * ({@link JobEnvironment}: this launcher's, torchrun's, Slurm's, MPI's, a Kubernetes indexed Job's), meeting the
 * other ranks at a rendezvous when no peer list is given. The static form, as the {@link LocalLauncher} sets it:
 *
 * <pre>
 *   ATTN4J_RANK        this worker's rank, 0 &lt;= rank &lt; world size
 *   ATTN4J_WORLD_SIZE  number of workers, &gt;= 1
 *   ATTN4J_PEERS       host:port of every rank in rank order, comma-separated (UDP; IPv6 as [addr]:port)
 *   ATTN4J_JOB_TOKEN   a shared secret of at least 16 characters, the same for every rank of the job
 *   ATTN4J_TIMEOUT_MS  optional: how long a transport call may wait (default 60000)
 *   ATTN4J_AERON_DIR   optional: the Aeron directory of an external media driver
 *   ATTN4J_BIND        optional: the address to bind (default: loopback with a peer list; with a rendezvous,
 *                      the address of the interface that routes to the master)
 * </pre>
 *
 * Immutable; {@link #toString()} never shows the token.
 *
 * @param rank      this worker's rank
 * @param worldSize the number of workers
 * @param peers     every rank's endpoint, by rank
 * @param jobToken  the shared secret
 * @param timeout   how long a transport call may wait
 * @param aeronDir  the external media driver's directory, if any
 * @param bind      the address to bind, if not loopback
 */
public record WorkerEnvironment(int rank, int worldSize, List<Endpoint> peers, String jobToken, Duration timeout,
                                Optional<String> aeronDir, Optional<String> bind) {

    /** This worker's rank. */
    public static final String RANK = "ATTN4J_RANK";
    /** The number of workers. */
    public static final String WORLD_SIZE = "ATTN4J_WORLD_SIZE";
    /** Every rank's host:port, comma-separated, in rank order. */
    public static final String PEERS = "ATTN4J_PEERS";
    /** The job's shared secret. */
    public static final String JOB_TOKEN = "ATTN4J_JOB_TOKEN";
    /** Optional transport timeout in milliseconds. */
    public static final String TIMEOUT_MS = "ATTN4J_TIMEOUT_MS";
    /** Optional Aeron directory of an external media driver. */
    public static final String AERON_DIR = "ATTN4J_AERON_DIR";
    /** Optional bind address. */
    public static final String BIND = "ATTN4J_BIND";

    /** The timeout when {@link #TIMEOUT_MS} is not set. */
    public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(60);
    /** The shortest job token accepted. */
    public static final int MIN_TOKEN_LENGTH = 16;

    /**
     * A UDP endpoint.
     *
     * @param host a host name or IP address (IPv6 without brackets)
     * @param port {@code 1 <= port <= 65535}
     */
    public record Endpoint(String host, int port) {

        /** {@code host:port}, IPv6 addresses in brackets. */
        @Override
        public String toString() {
            return (host.contains(":") ? "[" + host + "]" : host) + ":" + port;
        }
    }

    /** Validates the components (the token must not be shown in messages). */
    public WorkerEnvironment {
        if (worldSize < 1) {
            throw new IllegalArgumentException(WORLD_SIZE + ": expected an integer >= 1, got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException(RANK + ": expected an integer in [0, " + worldSize + ") ("
                    + WORLD_SIZE + " = " + worldSize + "), got " + rank);
        }
        peers = List.copyOf(peers);
        if (peers.size() != worldSize) {
            throw new IllegalArgumentException(PEERS + ": expected " + worldSize + " host:port entries, one per rank ("
                    + WORLD_SIZE + " = " + worldSize + "), got " + peers.size() + ": " + join(peers));
        }
        for (int i = 0; i < peers.size(); i++) {
            for (int j = 0; j < i; j++) {
                if (peers.get(i).equals(peers.get(j))) {
                    throw new IllegalArgumentException(PEERS + ": expected a distinct endpoint per rank, got "
                            + peers.get(i) + " for ranks " + j + " and " + i);
                }
            }
        }
        checkTokenAndTimeout(jobToken, timeout);
    }

    /** The checks of the token (never shown) and the timeout, shared with {@link JobEnvironment}. */
    static void checkTokenAndTimeout(String jobToken, Duration timeout) {
        if (jobToken == null || jobToken.length() < MIN_TOKEN_LENGTH || !jobToken.strip().equals(jobToken)) {
            throw new IllegalArgumentException(JOB_TOKEN + ": expected a secret of at least " + MIN_TOKEN_LENGTH
                    + " characters without surrounding blanks, got " + (jobToken == null ? "none"
                    : jobToken.length() + " characters" + (jobToken.strip().equals(jobToken) ? "" : " with blanks")));
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException(TIMEOUT_MS + ": expected a positive number of milliseconds, got "
                    + timeout.toMillis());
        }
    }

    /** Reads the process environment. */
    public static WorkerEnvironment fromEnvironment() {
        return from(System.getenv());
    }

    /**
     * Reads the variables from {@code env} ({@link JobEnvironment}: the rank from this launcher's or torchrun's,
     * Slurm's, MPI's or a Kubernetes indexed Job's variables) and, without {@code ATTN4J_PEERS}, meets the other
     * ranks at the master ({@code MASTER_ADDR}, {@code MASTER_PORT}) to learn their endpoints.
     *
     * @throws IllegalArgumentException    naming the variable, what was expected and what it held
     * @throws RendezvousException          in one line, when the ranks could not meet
     */
    public static WorkerEnvironment from(Map<String, String> env) {
        return JobEnvironment.from(env).connect();
    }

    /** This worker's own endpoint. */
    public Endpoint self() {
        return peers.get(rank);
    }

    /** The variables that describe this worker, e.g. to start it; the inverse of {@link #from}. */
    public Map<String, String> toVariables() {
        Map<String, String> m = new java.util.LinkedHashMap<>();
        m.put(RANK, Integer.toString(rank));
        m.put(WORLD_SIZE, Integer.toString(worldSize));
        m.put(PEERS, join(peers));
        m.put(JOB_TOKEN, jobToken);
        m.put(TIMEOUT_MS, Long.toString(timeout.toMillis()));
        aeronDir.ifPresent(d -> m.put(AERON_DIR, d));
        bind.ifPresent(b -> m.put(BIND, b));
        return m;
    }

    @Override
    public String toString() {
        return "worker " + rank + " of " + worldSize + ", peers " + join(peers) + ", timeout " + timeout.toMillis()
                + " ms" + aeronDir.map(d -> ", aeron dir " + d).orElse("") + bind.map(b -> ", bind " + b).orElse("")
                + ", token (" + jobToken.length() + " characters)";
    }

    private static String join(List<Endpoint> peers) {
        return String.join(",", peers.stream().map(Endpoint::toString).toList());
    }




    static Endpoint endpoint(String entry, int rank) {
        String bad = PEERS + " entry " + rank + ": expected host:port with a port in [1, 65535], got \"" + entry
                + "\"";
        int colon = entry.lastIndexOf(':');
        if (colon <= 0 || colon == entry.length() - 1) {
            throw new IllegalArgumentException(bad);
        }
        String host = entry.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        } else if (host.contains(":")) {
            throw new IllegalArgumentException(bad + " (write an IPv6 address in brackets: [addr]:port)");
        }
        int port;
        try {
            port = Integer.parseInt(entry.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(bad);
        }
        if (host.isBlank() || port < 1 || port > 65535) {
            throw new IllegalArgumentException(bad);
        }
        return new Endpoint(host, port);
    }
}
