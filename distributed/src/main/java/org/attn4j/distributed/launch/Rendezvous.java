package org.attn4j.distributed.launch;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.attn4j.distributed.launch.WorkerEnvironment.Endpoint;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the ranks of a job find each other when the scheduler only names a master (torchrun's MASTER_ADDR and
 * MASTER_PORT, Slurm's first node, a Kubernetes service). Rank 0 listens on the master's TCP port; every rank
 * binds its UDP endpoint to the address of its interface that routes to the master (or {@code ATTN4J_BIND}), takes
 * a free port (or {@code ATTN4J_PORT}), registers {@code host:port} there, and receives the table of every rank's
 * endpoint once all have registered.
 *
 * <p>The job token never crosses the wire: the master sends a fresh nonce, a rank answers with an HMAC-SHA256 under
 * the token over the nonce and its registration, and the master signs the table with the rank's own nonce, so
 * neither a worker of another job nor a stale master can take part. A registration with a wrong token is refused
 * and counted; the job goes on. A duplicate rank or a world size that differs from the master's fails every rank
 * at once, and ranks still missing when the rendezvous timeout runs out are named in the error every rank raises.
 */
final class Rendezvous {

    private static final Logger LOG = LoggerFactory.getLogger(Rendezvous.class);
    private static final int MAGIC = 0x41344A52;               // "A4JR"
    private static final int VERSION = 1;
    private static final int NONCE = 16;
    private static final byte OK = 0;
    private static final byte ERROR = 1;
    /** How long one connection may take to say who it is before the master drops it. */
    private static final int HELLO_TIMEOUT_MS = 10_000;
    /** Pause between attempts to reach a master that is not listening yet. */
    private static final long RETRY_MS = 250;

    private Rendezvous() {
    }

    /**
     * Meets the other ranks at the master of {@code job} and returns the full environment.
     *
     * @throws RendezvousException in one line naming what went wrong (ranks missing, duplicate, wrong token, ...)
     */
    static WorkerEnvironment join(JobEnvironment job) {
        Endpoint masterEndpoint = job.master().orElseThrow();
        long deadline = System.nanoTime() + job.rendezvousTimeout().toNanos();
        InetAddress master = resolve(masterEndpoint.host(), deadline, job);
        InetAddress bind = job.bind().map(b -> parse(b, WorkerEnvironment.BIND)).orElseGet(() -> routeTo(master,
                masterEndpoint.port()));
        if (bind.isAnyLocalAddress()) {
            throw new RendezvousException("rendezvous: cannot tell which address of this host reaches the master "
                    + masterEndpoint + "; set " + WorkerEnvironment.BIND + " to this host's address on that network");
        }
        Endpoint self = new Endpoint(bind.getHostAddress(), job.port() != 0 ? job.port() : freeUdpPort(bind));
        long start = System.nanoTime();
        List<Endpoint> table = job.rank() == 0 ? new Master(job, master, self).serve(deadline)
                : register(job, master, self, deadline);
        LOG.info("rank {}: rendezvous at {} done in {} ms; endpoint {}", job.rank(), masterEndpoint,
                (System.nanoTime() - start) / 1_000_000, self);
        return new WorkerEnvironment(job.rank(), job.worldSize(), table, job.jobToken(), job.timeout(),
                job.aeronDir(), Optional.of(self.host()));
    }

    /** A rank other than 0: registers at the master and waits for the table. */
    private static List<Endpoint> register(JobEnvironment job, InetAddress master, Endpoint self, long deadline) {
        Endpoint m = job.master().orElseThrow();
        String where = "rendezvous at " + m;
        while (true) {
            try (Socket s = connect(master, m.port(), deadline)) {
                if (s == null) {
                    throw new RendezvousException(where + ": rank 0 (the master) did not answer within "
                            + seconds(job.rendezvousTimeout()) + " (" + JobEnvironment.RENDEZVOUS_TIMEOUT_MS
                            + "); is rank 0 running, and are MASTER_ADDR and MASTER_PORT right?");
                }
                // The master's own deadline started when it did; give it time to say which ranks are missing.
                s.setSoTimeout((int) Math.min(Integer.MAX_VALUE, job.rendezvousTimeout().toMillis() + 30_000));
                DataInputStream in = new DataInputStream(s.getInputStream());
                DataOutputStream out = new DataOutputStream(s.getOutputStream());
                if (in.readInt() != MAGIC || in.readInt() != VERSION) {
                    throw new RendezvousException(where + ": the process listening there is not an attn4j "
                            + "rendezvous of this version");
                }
                byte[] masterNonce = in.readNBytes(NONCE);
                byte[] nonce = nonce();
                byte[] hello = hello(masterNonce, job.rank(), job.worldSize(), self, nonce);
                out.writeInt(MAGIC);
                out.writeInt(job.rank());
                out.writeInt(job.worldSize());
                out.writeUTF(self.host());
                out.writeInt(self.port());
                out.write(nonce);
                out.write(hmac(job.jobToken(), hello));
                out.flush();
                byte status = in.readByte();
                if (status != OK) {
                    throw new RendezvousException(in.readUTF());
                }
                int n = in.readInt();
                if (n != job.worldSize()) {
                    throw new RendezvousException(where + ": the table has " + n + " ranks, expected "
                            + job.worldSize());
                }
                List<Endpoint> table = new ArrayList<>();
                for (int r = 0; r < n; r++) {
                    table.add(new Endpoint(in.readUTF(), in.readInt()));
                }
                byte[] mac = in.readNBytes(32);
                if (!MessageDigest.isEqual(mac, hmac(job.jobToken(), table(nonce, table)))) {
                    throw new RendezvousException(where + ": the table is not signed with this job's token; "
                            + "another job's master is listening there");
                }
                return table;
            } catch (EOFException | SocketException e) {
                // A master that closed on us mid-way (it failed, or was restarted) is retried until the deadline.
                if (System.nanoTime() > deadline) {
                    throw new RendezvousException(where + ": the master closed the connection before sending the "
                            + "table (did rank 0 fail?)");
                }
                sleep(RETRY_MS);
            } catch (SocketTimeoutException e) {
                throw new RendezvousException(where + ": no table from the master within "
                        + seconds(job.rendezvousTimeout()) + " of registering");
            } catch (IOException e) {
                throw new RendezvousException(where + ": " + e.getMessage());
            }
        }
    }

    /** A connected socket, retrying refusals until the deadline; null once the deadline passed. */
    private static Socket connect(InetAddress master, int port, long deadline) throws IOException {
        while (true) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            Socket s = new Socket();
            try {
                s.connect(new InetSocketAddress(master, port), (int) Math.max(1, Math.min(5_000, left / 1_000_000)));
                s.setTcpNoDelay(true);
                return s;
            } catch (SocketTimeoutException | java.net.ConnectException | java.net.NoRouteToHostException e) {
                s.close();
                sleep(RETRY_MS);
            }
        }
    }

    /** Rank 0's side: the table, filled by the registrations. */
    private static final class Master {
        private final JobEnvironment job;
        private final InetAddress address;
        private final Endpoint[] table;
        private final Socket[] clients;
        private final byte[][] nonces;
        private String failure;
        private int refused;

        Master(JobEnvironment job, InetAddress address, Endpoint self) {
            this.job = job;
            this.address = address;
            this.table = new Endpoint[job.worldSize()];
            this.clients = new Socket[job.worldSize()];
            this.nonces = new byte[job.worldSize()][];
            table[0] = self;
        }

        List<Endpoint> serve(long deadline) {
            Endpoint m = job.master().orElseThrow();
            ServerSocket server;
            try {
                server = new ServerSocket();
                server.setReuseAddress(true);
                server.bind(new InetSocketAddress(address, m.port()), 256);
            } catch (IOException e) {
                throw new RendezvousException("rendezvous: rank 0 cannot listen on " + m + " ("
                        + address.getHostAddress() + ", TCP): " + e.getMessage() + "; rank 0 must run on the master "
                        + "host, and MASTER_PORT must be free there");
            }
            Thread acceptor = new Thread(() -> accept(server), "attn4j-rendezvous");
            acceptor.setDaemon(true);
            acceptor.start();
            try {
                synchronized (this) {
                    while (failure == null && missing().length > 0) {
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            failure = "rendezvous at " + m + ": " + describe(missing()) + " of " + job.worldSize()
                                    + " never arrived within " + seconds(job.rendezvousTimeout()) + " ("
                                    + JobEnvironment.RENDEZVOUS_TIMEOUT_MS + ")";
                            break;
                        }
                        wait(Math.max(1, left / 1_000_000));
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                failure = "rendezvous at " + m + ": interrupted";
            } finally {
                try {
                    server.close();
                } catch (IOException e) {
                    // closing a listening socket: nothing to lose
                }
            }
            synchronized (this) {
                for (int r = 1; r < clients.length; r++) {
                    if (clients[r] != null) {
                        reply(r);
                    }
                }
                if (refused > 0) {
                    LOG.warn("rendezvous at {}: refused {} registration(s) with a wrong job token", m, refused);
                }
                if (failure != null) {
                    throw new RendezvousException(failure);
                }
                return List.of(table);
            }
        }

        /** Accepts until the server socket closes; one short-lived thread per connection. */
        private void accept(ServerSocket server) {
            while (!server.isClosed()) {
                try {
                    Socket s = server.accept();
                    Thread t = new Thread(() -> handle(s), "attn4j-rendezvous-peer");
                    t.setDaemon(true);
                    t.start();
                } catch (IOException e) {
                    return;                                  // closed
                }
            }
        }

        private void handle(Socket s) {
            String from = s.getRemoteSocketAddress().toString();
            boolean kept = false;
            try {
                s.setSoTimeout(HELLO_TIMEOUT_MS);
                s.setTcpNoDelay(true);
                DataOutputStream out = new DataOutputStream(s.getOutputStream());
                DataInputStream in = new DataInputStream(s.getInputStream());
                byte[] masterNonce = nonce();
                out.writeInt(MAGIC);
                out.writeInt(VERSION);
                out.write(masterNonce);
                out.flush();
                if (in.readInt() != MAGIC) {
                    return;
                }
                int rank = in.readInt();
                int world = in.readInt();
                Endpoint e = new Endpoint(in.readUTF(), in.readInt());
                byte[] nonce = in.readNBytes(NONCE);
                byte[] mac = in.readNBytes(32);
                if (!MessageDigest.isEqual(mac, hmac(job.jobToken(), hello(masterNonce, rank, world, e, nonce)))) {
                    int count;
                    synchronized (this) {
                        count = ++refused;
                    }
                    LOG.warn("rendezvous: refused a registration as rank {} from {}: wrong job token ({} refused so "
                            + "far)", rank, from, count);
                    out.writeByte(ERROR);
                    out.writeUTF("rendezvous at " + job.master().orElseThrow() + " refused this worker: wrong job "
                            + "token (" + WorkerEnvironment.JOB_TOKEN + " differs from the master's)");
                    out.flush();
                    return;
                }
                synchronized (this) {
                    String where = "rendezvous at " + job.master().orElseThrow() + ": ";
                    if (failure != null) {
                        out.writeByte(ERROR);
                        out.writeUTF(failure);
                        out.flush();
                        return;
                    }
                    if (world != job.worldSize()) {
                        failure = where + "world size mismatch: rank " + rank + " (" + e + ") says " + world
                                + ", rank 0 says " + job.worldSize();
                    } else if (rank < 0 || rank >= table.length) {
                        failure = where + "rank " + rank + " (" + e + ") is outside [0, " + job.worldSize() + ")";
                    } else if (table[rank] != null) {
                        failure = where + "rank " + rank + " registered twice: from " + table[rank] + " and from "
                                + e;
                    } else {
                        table[rank] = e;
                        clients[rank] = s;
                        nonces[rank] = nonce;
                        kept = true;
                    }
                    if (failure != null) {
                        out.writeByte(ERROR);
                        out.writeUTF(failure);
                        out.flush();
                    }
                    notifyAll();
                }
            } catch (IOException | RuntimeException e) {
                LOG.debug("rendezvous: dropped a connection from {}: {}", from, e.toString());
            } finally {
                if (!kept) {
                    try {
                        s.close();
                    } catch (IOException e) {
                        // already gone
                    }
                }
            }
        }

        /** Sends rank r the table, or the failure, and closes its connection. */
        private void reply(int r) {
            try (Socket s = clients[r]) {
                DataOutputStream out = new DataOutputStream(s.getOutputStream());
                if (failure != null) {
                    out.writeByte(ERROR);
                    out.writeUTF(failure);
                } else {
                    out.writeByte(OK);
                    out.writeInt(table.length);
                    for (Endpoint e : table) {
                        out.writeUTF(e.host());
                        out.writeInt(e.port());
                    }
                    out.write(hmac(job.jobToken(), table(nonces[r], List.of(table))));
                }
                out.flush();
            } catch (IOException e) {
                LOG.warn("rendezvous: could not send rank {} the {}: {}", r, failure == null ? "table" : "failure",
                        e.toString());
            }
        }

        private int[] missing() {
            return IntStream.range(0, table.length).filter(r -> table[r] == null).toArray();
        }
    }

    /** "rank 3" or "ranks 1, 2, 5". */
    static String describe(int[] ranks) {
        return (ranks.length == 1 ? "rank " : "ranks ")
                + Arrays.stream(ranks).mapToObj(Integer::toString).collect(Collectors.joining(", "));
    }

    private static byte[] hello(byte[] masterNonce, int rank, int world, Endpoint e, byte[] nonce) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        try (DataOutputStream d = new DataOutputStream(b)) {
            d.writeUTF("attn4j-rendezvous-hello");
            d.write(masterNonce);
            d.writeInt(rank);
            d.writeInt(world);
            d.writeUTF(e.host());
            d.writeInt(e.port());
            d.write(nonce);
        } catch (IOException impossible) {
            throw new IllegalStateException(impossible);
        }
        return b.toByteArray();
    }

    private static byte[] table(byte[] nonce, List<Endpoint> table) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        try (DataOutputStream d = new DataOutputStream(b)) {
            d.writeUTF("attn4j-rendezvous-table");
            d.write(nonce);
            for (Endpoint e : table) {
                d.writeUTF(e.host());
                d.writeInt(e.port());
            }
        } catch (IOException impossible) {
            throw new IllegalStateException(impossible);
        }
        return b.toByteArray();
    }

    private static byte[] hmac(String token, byte[] message) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(token.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
            return mac.doFinal(message);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is missing from this JVM", e);
        }
    }

    private static byte[] nonce() {
        byte[] n = new byte[NONCE];
        new SecureRandom().nextBytes(n);
        return n;
    }

    /** The master's address, retrying name lookups until the deadline (a Kubernetes service may come up late). */
    private static InetAddress resolve(String host, long deadline, JobEnvironment job) {
        while (true) {
            try {
                return InetAddress.getByName(host);
            } catch (UnknownHostException e) {
                if (System.nanoTime() > deadline) {
                    throw new RendezvousException("rendezvous: the master host \"" + host + "\" (MASTER_ADDR) has no "
                            + "address after " + seconds(job.rendezvousTimeout()));
                }
                sleep(1_000);
            }
        }
    }

    private static InetAddress parse(String address, String variable) {
        try {
            return InetAddress.getByName(address);
        } catch (UnknownHostException e) {
            throw new RendezvousException(variable + ": expected an address of this host, got \"" + address + "\"");
        }
    }

    /** The source address the kernel picks for packets to {@code master}: the interface that routes there. */
    static InetAddress routeTo(InetAddress master, int port) {
        try (DatagramSocket s = new DatagramSocket()) {
            s.connect(master, port);
            return s.getLocalAddress();
        } catch (IOException e) {
            throw new RendezvousException("rendezvous: no route from this host to the master " + master
                    .getHostAddress() + ": " + e.getMessage() + "; set " + WorkerEnvironment.BIND);
        }
    }

    private static int freeUdpPort(InetAddress bind) {
        try {
            return FreePorts.udp(bind, 1)[0];
        } catch (java.io.UncheckedIOException e) {
            throw new RendezvousException("rendezvous: cannot bind a UDP port on " + bind.getHostAddress() + ": "
                    + e.getCause().getMessage());
        }
    }

    private static String seconds(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RendezvousException("rendezvous: interrupted");
        }
    }
}
