package org.attn4j.distributed.launch;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/** Free UDP ports on loopback, found by binding port 0 and letting go. */
final class FreePorts {

    private FreePorts() {
    }

    /**
     * {@code count} distinct UDP ports free on 127.0.0.1 at the time of the call. They are released before this
     * returns, so another process could take one before the worker binds it; the worker then fails at start with
     * the port in its message.
     */
    static int[] udp(int count) {
        List<DatagramSocket> held = new ArrayList<>();
        try {
            int[] ports = new int[count];
            for (int i = 0; i < count; i++) {
                DatagramSocket s = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
                held.add(s);
                ports[i] = s.getLocalPort();
            }
            return ports;
        } catch (IOException e) {
            throw new UncheckedIOException("LocalLauncher: could not find " + count + " free UDP ports on loopback",
                    e);
        } finally {
            held.forEach(DatagramSocket::close);
        }
    }
}
