package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.FileReader;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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

    @Test
    void twoDrawsFromOneSmallRangeNeverShareAPort(@TempDir Path reservations) {
        // Sixteen ports, eight drawn twice: without the reservations the second draw would reuse some of the
        // first's (released before it returns) in all but 1 of 12870 cases.
        int lowest = 20000 + ThreadLocalRandom.current().nextInt(0, 10000);
        InetAddress loopback = InetAddress.getLoopbackAddress();
        int[] first = FreePorts.udp(loopback, 8, lowest, lowest + 15, reservations);
        int[] second = FreePorts.udp(loopback, 8, lowest, lowest + 15, reservations);
        Set<Integer> all = new HashSet<>();
        Arrays.stream(first).forEach(all::add);
        Arrays.stream(second).forEach(all::add);
        assertEquals(16, all.size(), Arrays.toString(first) + " and " + Arrays.toString(second));
    }

    @Test
    void aReservationExpiresAfterAMinute(@TempDir Path reservations) throws Exception {
        assertTrue(FreePorts.reserve(reservations, 24001));
        assertFalse(FreePorts.reserve(reservations, 24001), "held by the first draw");
        Files.setLastModifiedTime(reservations.resolve("24001"), FileTime.from(Instant.now().minusSeconds(61)));
        assertTrue(FreePorts.reserve(reservations, 24001), "a reservation a minute old is taken over");
        assertFalse(FreePorts.reserve(reservations, 24001), "and held again");
    }
}
