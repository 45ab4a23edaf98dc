package org.attn4j.distributed.launch;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Free ports for the workers' endpoints, found by binding and letting go: each free for UDP and for TCP (a worker
 * listens on its endpoint's port in both, see {@code AeronTransportContext.Network}). They are drawn below the kernel's
 * ephemeral range ({@code /proc/sys/net/ipv4/ip_local_port_range}, 32768-60999 by default): a port from that range
 * could be handed, between our release and the worker's bind, to any socket that binds port 0, such as another
 * worker's Aeron publication, and that worker would then fail with "Address already in use".
 */
public final class FreePorts {

    /** The lowest port drawn: above the well-known and most registered service ports. */
    private static final int LOWEST = 20000;
    private static final int ATTEMPTS = 500;

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
        int top = ephemeralStart() - 1;
        List<AutoCloseable> held = new ArrayList<>();
        try {
            int[] ports = new int[count];
            for (int i = 0; i < count; i++) {
                int port = top > LOWEST + count ? bindBelow(bind, top, held) : -1;
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

    /** A random port in {@code [LOWEST, top]} free for UDP and TCP, both held, or -1 after {@link #ATTEMPTS} tries. */
    private static int bindBelow(InetAddress bind, int top, List<AutoCloseable> held) {
        for (int i = 0; i < ATTEMPTS; i++) {
            int port = ThreadLocalRandom.current().nextInt(LOWEST, top + 1);
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
