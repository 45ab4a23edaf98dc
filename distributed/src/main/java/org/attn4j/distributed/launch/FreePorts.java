package org.attn4j.distributed.launch;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Free UDP ports for the workers' endpoints, found by binding and letting go. They are drawn below the kernel's
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
     * {@code count} distinct UDP ports free on {@code bind} at the time of the call, outside the ephemeral range
     * when the range leaves room below it (else any free port). Released before this returns: another process
     * could still take one before the worker binds it; the worker then fails at start with the port in its message.
     *
     * @throws UncheckedIOException if not enough ports could be bound
     */
    public static int[] udp(InetAddress bind, int count) {
        int top = ephemeralStart() - 1;
        List<DatagramSocket> held = new ArrayList<>();
        try {
            int[] ports = new int[count];
            for (int i = 0; i < count; i++) {
                DatagramSocket s = top > LOWEST + count ? bindBelow(bind, top) : null;
                if (s == null) {
                    s = new DatagramSocket(new InetSocketAddress(bind, 0));
                }
                held.add(s);
                ports[i] = s.getLocalPort();
            }
            return ports;
        } catch (IOException e) {
            throw new UncheckedIOException("could not find " + count + " free UDP ports on " + bind.getHostAddress(), e);
        } finally {
            held.forEach(DatagramSocket::close);
        }
    }

    /** {@code count} free UDP ports on 127.0.0.1. */
    static int[] udp(int count) {
        return udp(InetAddress.getLoopbackAddress(), count);
    }

    /** A socket bound to a random free port in {@code [LOWEST, top]}, or null after {@link #ATTEMPTS} tries. */
    private static DatagramSocket bindBelow(InetAddress bind, int top) {
        for (int i = 0; i < ATTEMPTS; i++) {
            int port = ThreadLocalRandom.current().nextInt(LOWEST, top + 1);
            try {
                return new DatagramSocket(new InetSocketAddress(bind, port));
            } catch (IOException taken) {
                // try another
            }
        }
        return null;
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
