package org.attn4j.distributed.launch;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.attn4j.distributed.launch.WorkerEnvironment.Endpoint;

/**
 * What a worker learns from the scheduler that started it, before any network traffic: its rank, the world size,
 * and either every rank's endpoint ({@code ATTN4J_PEERS}) or the master to meet the others at
 * ({@link Rendezvous}). {@link #connect()} turns it into a {@link WorkerEnvironment}.
 *
 * <p>Rank and world size are read from the first of these that is present:
 *
 * <table>
 *   <caption>Where the rank comes from, in order of precedence</caption>
 *   <tr><th>launcher</th><th>rank</th><th>world size</th><th>local rank</th></tr>
 *   <tr><td>attn4j</td><td>ATTN4J_RANK</td><td>ATTN4J_WORLD_SIZE</td><td>ATTN4J_LOCAL_RANK</td></tr>
 *   <tr><td>torchrun</td><td>RANK</td><td>WORLD_SIZE</td><td>LOCAL_RANK</td></tr>
 *   <tr><td>slurm</td><td>SLURM_PROCID</td><td>SLURM_NTASKS</td><td>SLURM_LOCALID</td></tr>
 *   <tr><td>open-mpi</td><td>OMPI_COMM_WORLD_RANK</td><td>OMPI_COMM_WORLD_SIZE</td>
 *       <td>OMPI_COMM_WORLD_LOCAL_RANK</td></tr>
 *   <tr><td>pmi (MPICH, Intel MPI)</td><td>PMI_RANK</td><td>PMI_SIZE</td><td>MPI_LOCALRANKID</td></tr>
 *   <tr><td>kubernetes (indexed Job)</td><td>JOB_COMPLETION_INDEX</td><td>ATTN4J_WORLD_SIZE or WORLD_SIZE</td>
 *       <td></td></tr>
 * </table>
 *
 * <p>The master is {@code ATTN4J_MASTER_ADDR}, else {@code MASTER_ADDR}, else (under Slurm) the first host of
 * {@code SLURM_JOB_NODELIST}; its port {@code ATTN4J_MASTER_PORT}, else {@code MASTER_PORT}, else
 * {@value #DEFAULT_MASTER_PORT} (torchrun's default). Under torchrun itself, whose agent already listens on
 * {@code MASTER_PORT} ({@code TORCHELASTIC_USE_AGENT_STORE=True}), the rendezvous takes {@code MASTER_PORT + 1}
 * unless {@code ATTN4J_MASTER_PORT} says otherwise. {@code ATTN4J_PEERS}, when set, is used instead of a
 * rendezvous. {@code ATTN4J_JOB_TOKEN} is always required.
 *
 * @param launcher          which row of the table gave the rank
 * @param rank              this worker's rank
 * @param worldSize         the number of workers
 * @param localRank         the rank among the workers on this host, or -1 if the launcher does not say
 * @param peers             every rank's endpoint ({@code ATTN4J_PEERS}), or empty for a rendezvous
 * @param master            the rendezvous master, if there is no peer list
 * @param jobToken          the shared secret
 * @param timeout           how long a transport call may wait
 * @param rendezvousTimeout how long the rendezvous waits for every rank
 * @param aeronDir          an external media driver's directory, if any
 * @param bind              the address to bind the transport to, if given
 * @param port              the UDP port of this rank's endpoint in a rendezvous ({@code ATTN4J_PORT}), or 0 for
 *                          a free one
 */
public record JobEnvironment(String launcher, int rank, int worldSize, int localRank, List<Endpoint> peers,
                             Optional<Endpoint> master, String jobToken, Duration timeout, Duration rendezvousTimeout,
                             Optional<String> aeronDir, Optional<String> bind, int port) {

    /** Overrides {@code MASTER_ADDR}. */
    public static final String MASTER_ADDR = "ATTN4J_MASTER_ADDR";
    /** Overrides {@code MASTER_PORT}. */
    public static final String MASTER_PORT = "ATTN4J_MASTER_PORT";
    /** The UDP port of this rank's endpoint in a rendezvous (default: a free one). */
    public static final String PORT = "ATTN4J_PORT";
    /** How long the rendezvous waits for every rank, in milliseconds. */
    public static final String RENDEZVOUS_TIMEOUT_MS = "ATTN4J_RENDEZVOUS_TIMEOUT_MS";
    /** The rendezvous wait when {@link #RENDEZVOUS_TIMEOUT_MS} is not set. */
    public static final Duration DEFAULT_RENDEZVOUS_TIMEOUT = Duration.ofSeconds(300);
    /** Set by torchrun when its agent serves a TCPStore on MASTER_PORT; the rendezvous then takes the next port. */
    static final String TORCHRUN_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE";
    /** The master port when no variable gives one (torchrun's default). */
    public static final int DEFAULT_MASTER_PORT = 29500;

    /** One row of the table in the class comment. */
    private record Source(String launcher, String rank, String worldSize, String localRank) {
    }

    private static final List<Source> SOURCES = List.of(
            new Source("attn4j", WorkerEnvironment.RANK, WorkerEnvironment.WORLD_SIZE, "ATTN4J_LOCAL_RANK"),
            new Source("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
            new Source("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
            new Source("open-mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            new Source("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            new Source("kubernetes", "JOB_COMPLETION_INDEX", null, null));

    /** Validates the components. */
    public JobEnvironment {
        peers = List.copyOf(peers);
        if (peers.isEmpty() && master.isEmpty()) {
            throw new IllegalArgumentException("no way to find the other ranks: set MASTER_ADDR and MASTER_PORT "
                    + "(rendezvous at rank 0) or " + WorkerEnvironment.PEERS + " (every rank's host:port)");
        }
        if (rendezvousTimeout.isNegative() || rendezvousTimeout.isZero()) {
            throw new IllegalArgumentException(RENDEZVOUS_TIMEOUT_MS + ": expected a positive number of "
                    + "milliseconds, got " + rendezvousTimeout.toMillis());
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException(PORT + ": expected a UDP port in [1, 65535], got " + port);
        }
        if (localRank < -1 || localRank >= worldSize) {
            throw new IllegalArgumentException("local rank: expected an integer in [0, " + worldSize + "), got "
                    + localRank);
        }
        if (worldSize < 1 || rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank: expected an integer in [0, " + worldSize + "), got " + rank);
        }
        if (!peers.isEmpty()) {                        // the same checks as the transport's, before any traffic
            new WorkerEnvironment(rank, worldSize, peers, jobToken, timeout, aeronDir, bind);
        }
        WorkerEnvironment.checkTokenAndTimeout(jobToken, timeout);
    }

    /**
     * The launcher whose rank and world size variables are both present in {@code env} ("attn4j", "torchrun",
     * "slurm", "open-mpi", "pmi", "kubernetes"), or empty when none is: then a command starts its own local
     * workers. (A lone {@code RANK} is no torchrun job.)
     */
    public static Optional<String> launcherOf(Map<String, String> env) {
        for (Source s : SOURCES) {
            boolean world = s.worldSize != null ? set(env, s.worldSize)
                    : set(env, WorkerEnvironment.WORLD_SIZE) || set(env, "WORLD_SIZE");
            if (set(env, s.rank) && world) {
                return Optional.of(s.launcher);
            }
        }
        return Optional.empty();
    }

    /** Reads the process environment. */
    public static JobEnvironment fromEnvironment() {
        return from(System.getenv());
    }

    /**
     * Reads the variables from {@code env}; no network traffic.
     *
     * @throws IllegalArgumentException naming the variable, what was expected and what it held
     */
    public static JobEnvironment from(Map<String, String> env) {
        Source source = SOURCES.stream().filter(s -> set(env, s.rank)).findFirst().orElse(null);
        if (source == null) {
            throw new IllegalArgumentException(WorkerEnvironment.RANK + " is not set: expected this worker's rank "
                    + "(or the rank of a launcher: RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                    + "JOB_COMPLETION_INDEX)");
        }
        String worldName = source.worldSize != null ? source.worldSize
                : set(env, WorkerEnvironment.WORLD_SIZE) ? WorkerEnvironment.WORLD_SIZE : "WORLD_SIZE";
        if (!set(env, worldName)) {
            throw new IllegalArgumentException(worldName + " is not set: expected the number of workers, an "
                    + "integer >= 1 (" + source.rank + " gives the rank, " + source.launcher + ")"
                    + (source.worldSize == null ? "; a Kubernetes indexed Job sets it from its completions" : ""));
        }
        int worldSize = integer(env, worldName, "the number of workers, an integer >= 1");
        int rank = integer(env, source.rank, "this worker's rank, an integer in [0, " + worldName + ")");
        if (worldSize < 1) {
            throw new IllegalArgumentException(worldName + ": expected an integer >= 1, got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException(source.rank + ": expected an integer in [0, " + worldSize + ") ("
                    + worldName + " = " + worldSize + "), got " + rank);
        }
        int localRank = -1;
        if (source.localRank != null && set(env, source.localRank)) {
            localRank = integer(env, source.localRank, "this worker's rank on its host, an integer in [0, "
                    + worldSize + ")");
            if (localRank < 0 || localRank >= worldSize) {
                throw new IllegalArgumentException(source.localRank + ": expected an integer in [0, " + worldSize
                        + "), got " + localRank);
            }
        }
        List<Endpoint> peers = new ArrayList<>();
        if (set(env, WorkerEnvironment.PEERS)) {
            String[] entries = env.get(WorkerEnvironment.PEERS).split(",", -1);
            for (int i = 0; i < entries.length; i++) {
                peers.add(WorkerEnvironment.endpoint(entries[i].strip(), i));
            }
        }
        Optional<Endpoint> master = peers.isEmpty() ? master(env, source) : Optional.empty();
        if (!set(env, WorkerEnvironment.JOB_TOKEN)) {
            throw new IllegalArgumentException(WorkerEnvironment.JOB_TOKEN + " is not set: expected the job's shared "
                    + "secret, the same on every rank (e.g. export " + WorkerEnvironment.JOB_TOKEN
                    + "=$(openssl rand -hex 16) where the job is submitted)");
        }
        return new JobEnvironment(source.launcher, rank, worldSize, localRank, peers, master,
                env.get(WorkerEnvironment.JOB_TOKEN),
                millis(env, WorkerEnvironment.TIMEOUT_MS, WorkerEnvironment.DEFAULT_TIMEOUT),
                millis(env, RENDEZVOUS_TIMEOUT_MS, DEFAULT_RENDEZVOUS_TIMEOUT),
                optional(env, WorkerEnvironment.AERON_DIR), optional(env, WorkerEnvironment.BIND),
                set(env, PORT) ? port(env, PORT, "a UDP port in [1, 65535]") : 0);
    }

    /** The endpoints from {@code ATTN4J_PEERS} as they are, or from a rendezvous at the master. */
    public WorkerEnvironment connect() {
        if (!peers.isEmpty()) {
            return new WorkerEnvironment(rank, worldSize, peers, jobToken, timeout, aeronDir, bind);
        }
        return Rendezvous.join(this);
    }

    @Override
    public String toString() {
        return "rank " + rank + " of " + worldSize + " (" + launcher + (localRank >= 0 ? ", local rank " + localRank
                : "") + ")" + master.map(m -> ", master " + m).orElse(", static peers")
                + ", token (" + jobToken.length() + " characters)";
    }

    private static Optional<Endpoint> master(Map<String, String> env, Source source) {
        String addrName = set(env, MASTER_ADDR) ? MASTER_ADDR : "MASTER_ADDR";
        String host;
        if (set(env, addrName)) {
            host = env.get(addrName).strip();
        } else if (source.launcher.equals("slurm") && (set(env, "SLURM_JOB_NODELIST") || set(env, "SLURM_NODELIST"))) {
            String list = set(env, "SLURM_JOB_NODELIST") ? env.get("SLURM_JOB_NODELIST") : env.get("SLURM_NODELIST");
            host = HostList.expand(list).get(0);
        } else {
            return Optional.empty();
        }
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        if (host.isEmpty() || host.contains(",") || host.contains("/") || host.contains(" ")) {
            throw new IllegalArgumentException(addrName + ": expected one host name or IP address, got \""
                    + env.get(addrName) + "\"");
        }
        String portName = set(env, MASTER_PORT) ? MASTER_PORT : "MASTER_PORT";
        int port = set(env, portName) ? port(env, portName, "a TCP port in [1, 65535]") : DEFAULT_MASTER_PORT;
        if (portName.equals("MASTER_PORT") && "true".equalsIgnoreCase(env.get(TORCHRUN_AGENT_STORE))) {
            // torchrun's agent already listens on MASTER_PORT (its TCPStore): meet on the port after it.
            if (port == 65535) {
                throw new IllegalArgumentException("MASTER_PORT: torchrun's store holds 65535 and the rendezvous "
                        + "takes the port after MASTER_PORT; set " + MASTER_PORT);
            }
            port++;
        }
        return Optional.of(new Endpoint(host, port));
    }

    private static int port(Map<String, String> env, String name, String meaning) {
        int port = integer(env, name, meaning);
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException(name + ": expected " + meaning + ", got " + port);
        }
        return port;
    }

    private static boolean set(Map<String, String> env, String name) {
        String v = env.get(name);
        return v != null && !v.isBlank();
    }

    private static Optional<String> optional(Map<String, String> env, String name) {
        return set(env, name) ? Optional.of(env.get(name).strip()) : Optional.empty();
    }

    private static int integer(Map<String, String> env, String name, String meaning) {
        String v = env.get(name);
        try {
            return Integer.parseInt(v.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + ": expected " + meaning + ", got \"" + v + "\"");
        }
    }

    private static Duration millis(Map<String, String> env, String name, Duration fallback) {
        if (!set(env, name)) {
            return fallback;
        }
        String v = env.get(name);
        try {
            long ms = Long.parseLong(v.strip());
            if (ms <= 0) {
                throw new IllegalArgumentException(name + ": expected a positive number of milliseconds, got " + ms);
            }
            return Duration.ofMillis(ms);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + ": expected a positive number of milliseconds, got \"" + v
                    + "\"");
        }
    }
}
