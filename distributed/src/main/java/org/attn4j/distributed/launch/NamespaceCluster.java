package org.attn4j.distributed.launch;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Many "hosts" on one Linux machine, for tests and benchmarks of multi-host jobs: one network namespace per host,
 * each with its own {@code eth0} and IPv4 address, joined by a bridge through veth pairs, optionally every host's
 * outgoing link limited by a {@code tc} token bucket ({@code tbf}). Host {@code i} is named {@code node<i+1>} in
 * every namespace's {@code /etc/hosts} (through {@code /etc/netns/NAME/hosts}). A worker runs in host {@code i}
 * when started behind {@link #prefix(int)} ({@code ip netns exec NAME}).
 *
 * <p>Needs root or CAP_NET_ADMIN and the {@code ip} and {@code tc} tools ({@link #unavailable()} says why not);
 * {@link #close()} removes the namespaces, the bridge and the hosts files, and a shutdown hook does so if the JVM
 * exits first.
 */
public final class NamespaceCluster implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(NamespaceCluster.class);

    private final String tag;
    private final int hosts;
    private final List<String> namespaces = new ArrayList<>();
    private final Thread hook;
    private boolean closed;

    private NamespaceCluster(String tag, int hosts) {
        this.tag = tag;
        this.hosts = hosts;
        this.hook = new Thread(this::removeAll, "attn4j-namespace-cleanup");
    }

    /** Empty if this process can create namespaces here, else one line saying why not. */
    public static Optional<String> unavailable() {
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            return Optional.of("network namespaces need Linux, this is " + System.getProperty("os.name"));
        }
        String probe = "a4jprobe" + ProcessHandle.current().pid() % 100000;
        try {
            String out = run(List.of("ip", "netns", "add", probe));
            if (out != null) {
                return Optional.of("cannot create a network namespace (needs root or CAP_NET_ADMIN): " + out);
            }
            run(List.of("ip", "netns", "del", probe));
            String tc = run(List.of("tc", "-V"));
            if (tc != null) {
                return Optional.of("the tc tool is missing: " + tc);
            }
            return Optional.empty();
        } catch (IOException e) {
            return Optional.of("the ip tool is missing: " + e.getMessage());
        }
    }

    /**
     * Creates {@code hosts} namespaces on a bridge.
     *
     * @param hosts    how many, {@code 1 <= hosts <= 200}
     * @param rateMbit each host's outgoing link rate in Mbit/s, or 0 for no limit
     * @throws IOException naming the command that failed (everything created so far is removed)
     */
    public static NamespaceCluster create(int hosts, double rateMbit) throws IOException {
        return create(hosts, rateMbit, 0);
    }

    /**
     * Creates {@code hosts} namespaces on a bridge whose links (both ends of every veth pair) have an MTU of
     * {@code linkMtu} bytes (jumbo frames, e.g. 9000), or the kernel's default (1500) when 0.
     *
     * @throws IOException naming the command that failed (everything created so far is removed)
     */
    public static NamespaceCluster create(int hosts, double rateMbit, int linkMtu) throws IOException {
        if (hosts < 1 || hosts > 200) {
            throw new IllegalArgumentException("NamespaceCluster: hosts must be in [1, 200], got " + hosts);
        }
        if (linkMtu != 0 && (linkMtu < 576 || linkMtu > 65535)) {
            throw new IllegalArgumentException("NamespaceCluster: link MTU must be 0 (default) or in [576, 65535], got "
                    + linkMtu);
        }
        String tag = Long.toString(ProcessHandle.current().pid() % 10000) + (char) ('a' + SEQUENCE.getAndIncrement()
                % 26);
        NamespaceCluster c = new NamespaceCluster(tag, hosts);
        Runtime.getRuntime().addShutdownHook(c.hook);
        try {
            c.build(rateMbit, linkMtu);
        } catch (IOException | RuntimeException e) {
            c.close();
            throw e;
        }
        return c;
    }

    private static final java.util.concurrent.atomic.AtomicInteger SEQUENCE = new java.util.concurrent.atomic
            .AtomicInteger();

    private void build(double rateMbit, int linkMtu) throws IOException {
        must(List.of("ip", "link", "add", bridge(), "type", "bridge"));
        must(List.of("ip", "link", "set", bridge(), "up"));
        StringBuilder hostsFile = new StringBuilder("127.0.0.1 localhost\n");
        for (int i = 0; i < hosts; i++) {
            hostsFile.append(address(i)).append(' ').append(hostName(i)).append('\n');
        }
        for (int i = 0; i < hosts; i++) {
            String ns = namespace(i);
            must(List.of("ip", "netns", "add", ns));
            namespaces.add(ns);
            must(List.of("ip", "link", "add", "a4jv" + tag + "-" + i, "type", "veth", "peer", "name", "eth0",
                    "netns", ns));
            if (linkMtu > 0) {
                // The bridge takes the smallest MTU of its ports, so both ends of every pair get the same one.
                must(List.of("ip", "link", "set", "a4jv" + tag + "-" + i, "mtu", Integer.toString(linkMtu)));
                must(List.of("ip", "-n", ns, "link", "set", "eth0", "mtu", Integer.toString(linkMtu)));
            }
            must(List.of("ip", "link", "set", "a4jv" + tag + "-" + i, "master", bridge(), "up"));
            must(List.of("ip", "-n", ns, "addr", "add", address(i) + "/16", "dev", "eth0"));
            must(List.of("ip", "-n", ns, "link", "set", "eth0", "up"));
            must(List.of("ip", "-n", ns, "link", "set", "lo", "up"));
            if (rateMbit > 0) {
                // A token bucket on the host's egress: its link sends at most rateMbit. The burst covers a few
                // Aeron datagrams at 1 Gbit/s; the queue holds 50 ms of traffic before the kernel drops.
                must(List.of("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                        fmt(rateMbit) + "mbit", "burst", "256kb", "latency", "50ms"));
            }
            Path dir = Path.of("/etc/netns", ns);
            Files.createDirectories(dir);
            Files.writeString(dir.resolve("hosts"), hostsFile, StandardCharsets.US_ASCII);
        }
        LOG.info("namespace cluster {}: {} hosts {}..{}{}{}", tag, hosts, address(0), address(hosts - 1),
                rateMbit > 0 ? ", links " + fmt(rateMbit) + " Mbit/s" : "", linkMtu > 0 ? ", MTU " + linkMtu : "");
    }

    /** The number of hosts. */
    public int hosts() {
        return hosts;
    }

    /** Host {@code i}'s IPv4 address. */
    public String address(int i) {
        return "10.213." + (i / 250) + "." + (i % 250 + 1);
    }

    /** Host {@code i}'s name in every namespace's {@code /etc/hosts}: {@code node1}, {@code node2}, ... */
    public String hostName(int i) {
        return "node" + (i + 1);
    }

    /** Host {@code i}'s namespace. */
    public String namespace(int i) {
        return "a4j" + tag + "-" + i;
    }

    /** The words that start a command in host {@code i}: {@code ip netns exec NAME}. */
    public List<String> prefix(int i) {
        return List.of("ip", "netns", "exec", namespace(i));
    }

    /** The process ids running in host {@code i}. */
    public List<Long> pids(int i) throws IOException {
        Process p = new ProcessBuilder("ip", "netns", "pids", namespace(i)).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        List<Long> pids = new ArrayList<>();
        for (String line : out.split("\\s+")) {
            if (line.matches("[0-9]+")) {
                pids.add(Long.parseLong(line));
            }
        }
        return pids;
    }

    /** SIGKILL to every process in host {@code i}; the number killed. */
    public int killAll(int i) throws IOException {
        List<Long> pids = pids(i);
        for (long pid : pids) {
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
        }
        return pids.size();
    }

    private String bridge() {
        return "a4jbr" + tag;
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        removeAll();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // the hook is running
        }
    }

    /** Deleting a namespace deletes its veth pair; then the bridge and the hosts files go. */
    private void removeAll() {
        for (int i = 0; i < hosts; i++) {
            try {
                for (long pid : pids(i)) {
                    ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
                }
                run(List.of("ip", "netns", "del", namespace(i)));
                Path dir = Path.of("/etc/netns", namespace(i));
                Files.deleteIfExists(dir.resolve("hosts"));
                Files.deleteIfExists(dir);
            } catch (IOException e) {
                LOG.warn("namespace cluster {}: could not remove {}: {}", tag, namespace(i), e.toString());
            }
        }
        try {
            run(List.of("ip", "link", "del", bridge()));
        } catch (IOException e) {
            LOG.warn("namespace cluster {}: could not remove the bridge: {}", tag, e.toString());
        }
    }

    private static void must(List<String> cmd) throws IOException {
        String err = run(cmd);
        if (err != null) {
            throw new IOException(String.join(" ", cmd) + ": " + err);
        }
    }

    /** Runs a command; null if it succeeded, else its output (one line). */
    private static String run(List<String> cmd) throws IOException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        try {
            if (!p.waitFor(30, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "timed out";
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted: " + String.join(" ", cmd));
        }
        return p.exitValue() == 0 ? null : (out.isEmpty() ? "exit code " + p.exitValue() : out.replace('\n', ' '));
    }

    private static String fmt(double x) {
        return x == Math.rint(x) ? Long.toString((long) x) : Double.toString(x);
    }
}
