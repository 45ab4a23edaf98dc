package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.FileReader;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

import org.junit.jupiter.api.Test;

/**
 * Worker ports come from below the kernel's ephemeral range, where no socket bound to port 0 (another worker's
 * Aeron publication) can take one before its worker binds it.
 */
class FreePortsTest {

    @Test
    void portsAreDistinctAndBelowTheEphemeralRange() throws Exception {
        Path range = Path.of("/proc/sys/net/ipv4/ip_local_port_range");
        assumeTrue(Files.exists(range), "no " + range + " on this system");
        int start;
        try (BufferedReader r = new BufferedReader(new FileReader(range.toFile()))) {
            start = Integer.parseInt(r.readLine().trim().split("\\s+")[0]);
        }
        assumeTrue(start > 21000, "the ephemeral range starts at " + start + ": no room below it");
        for (int round = 0; round < 20; round++) {
            int[] ports = FreePorts.udp(InetAddress.getLoopbackAddress(), 8);
            assertEquals(8, Arrays.stream(ports).distinct().count(), Arrays.toString(ports));
            for (int p : ports) {
                assertTrue(p >= 20000 && p < start, "port " + p + " of " + Arrays.toString(ports)
                        + " is not in [20000, " + start + ")");
            }
        }
    }
}
