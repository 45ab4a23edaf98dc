package org.attn4j.distributed.launch;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Free ports for the workers' endpoints, found by binding and letting go: each free for UDP and for TCP (a worker
 * listens on its endpoint's port in both, see {@code AeronTransportContext.Network}). They are drawn below the kernel's
 * ephemeral range ({@code /proc/sys/net/ipv4/ip_local_port_range}, 32768-60999 by default): a port from that range
 * could be handed, between our release and the worker's bind, to any socket that binds port 0, such as another
 * worker's Aeron publication, and that worker would then fail with "Address already in use". A port drawn is also
 * reserved for a minute in a file under {@code java.io.tmpdir/attn4j-ports}, so two processes drawing ports at once
 * (two launchers on one host, a build's parallel test JVMs) never hand the same one to their workers; where that
 * directory cannot be written, ports are drawn without it.
 */
public final class FreePorts {

    /** The lowest port drawn: above the well-known and most registered service ports. */
    private static final int LOWEST = 20000;
    private static final int ATTEMPTS = 500;
    /** How long a drawn port stays reserved: ample for a worker to start and bind it. */
    private static final long RESERVED_MS = 60_000;
    private static final Path RESERVATIONS = Path.of(System.getProperty("java.io.tmpdir"), "attn4j-ports");

    private FreePorts() {
    }

    /**
     * {@code count} distinct ports free for UDP and TCP on {@code bind} at the time of the call, outside the ephemeral range
     * when the range leaves room below it (else any free port). Released before this returns: another process
     * could still take one before the worker binds it; the worker then fails at start with the port in its message.
     *
     * @throws UncheckedIOException if not enough ports could be bound
     */
    public static int[] udp(InetAddress bind, int count) {
        return udp(bind, count, LOWEST, ephemeralStart() - 1, RESERVATIONS);
    }

    /** As {@link #udp(InetAddress, int)}, drawing from {@code [lowest, top]} with reservations in {@code reserved}. */
    static int[] udp(InetAddress bind, int count, int lowest, int top, Path reserved) {
        Path reservations = writable(reserved);
        List<AutoCloseable> held = new ArrayList<>();
        try {
            int[] ports = new int[count];
            for (int i = 0; i < count; i++) {
                int port = top > lowest + count ? bindBelow(bind, lowest, top, reservations, held) : -1;
                for (int attempt = 0; port < 0 && attempt < ATTEMPTS; attempt++) {
                    DatagramSocket s = new DatagramSocket(new InetSocketAddress(bind, 0));
                    port = bindTcp(bind, s, held);
                }
                if (port < 0) {
                    throw new IOException("no port free for both UDP and TCP");
                }
                ports[i] = port;
            }
            return ports;
        } catch (IOException e) {
            throw new UncheckedIOException("could not find " + count + " free ports on " + bind.getHostAddress(), e);
        } finally {
            for (AutoCloseable c : held) {
                try {
                    c.close();
                } catch (Exception ignored) {
                    // released anyway
                }
            }
        }
    }

    /** Binds TCP on {@code udp}'s port too: the port, with both sockets held, or -1 (and {@code udp} closed). */
    private static int bindTcp(InetAddress bind, DatagramSocket udp, List<AutoCloseable> held) {
        try {
            ServerSocket tcp = new ServerSocket();
            try {
                tcp.bind(new InetSocketAddress(bind, udp.getLocalPort()));
            } catch (IOException taken) {
                tcp.close();
                udp.close();
                return -1;
            }
            held.add(udp);
            held.add(tcp);
            return udp.getLocalPort();
        } catch (IOException e) {
            udp.close();
            return -1;
        }
    }

    /** {@code count} free ports (UDP and TCP) on 127.0.0.1. */
    static int[] udp(int count) {
        return udp(InetAddress.getLoopbackAddress(), count);
    }

    /**
     * A random port in {@code [lowest, top]} free for UDP and TCP and not reserved by another draw, both sockets
     * held and the port reserved, or -1 after {@link #ATTEMPTS} tries.
     */
    private static int bindBelow(InetAddress bind, int lowest, int top, Path reserved, List<AutoCloseable> held) {
        for (int i = 0; i < ATTEMPTS; i++) {
            int port = ThreadLocalRandom.current().nextInt(lowest, top + 1);
            if (!reserve(reserved, port)) {
                continue;
            }
            DatagramSocket udp;
            try {
                udp = new DatagramSocket(new InetSocketAddress(bind, port));
            } catch (IOException taken) {
                continue;
            }
            int bound = bindTcp(bind, udp, held);
            if (bound > 0) {
                return bound;
            }
        }
        return -1;
    }

    /** {@code dir}, made if missing, or null when it cannot be (ports are then drawn without reservations). */
    private static Path writable(Path dir) {
        try {
            return Files.createDirectories(dir);
        } catch (IOException | SecurityException e) {
            return null;
        }
    }

    /**
     * Reserves {@code port} for {@link #RESERVED_MS}: creates its file in {@code dir}, or takes over a file older
     * than that (moved aside first, so of two processes taking it over at once only one gets it). True when
     * reserved here, or when there are no reservations ({@code dir} null or not writable); false when another draw
     * holds it.
     */
    static boolean reserve(Path dir, int port) {
        if (dir == null) {
            return true;
        }
        Path file = dir.resolve(Integer.toString(port));
        try {
            try {
                Files.createFile(file);
                return true;
            } catch (FileAlreadyExistsException held) {
                if (System.currentTimeMillis() - Files.getLastModifiedTime(file).toMillis() < RESERVED_MS) {
                    return false;
                }
                Path aside = dir.resolve(port + "." + Long.toHexString(ThreadLocalRandom.current().nextLong()));
                Files.move(file, aside, StandardCopyOption.ATOMIC_MOVE);
                Files.delete(aside);
                Files.createFile(file);
                return true;
            }
        } catch (FileAlreadyExistsException | NoSuchFileException raced) {
            return false;                                   // another process took the expired reservation first
        } catch (IOException | SecurityException unwritable) {
            return true;
        }
    }

    /** The first port of the kernel's ephemeral range, or 32768 where it cannot be read. */
    private static int ephemeralStart() {
        try {
            // readAllLines, not readString: on procfs (files of size 0) readString returned a truncated "3" here.
            String[] range = Files.readAllLines(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).get(0).trim()
                    .split("\\s+");
            return Integer.parseInt(range[0]);
        } catch (IOException | RuntimeException e) {
            return 32768;
        }
    }
}
