package org.attn4j.distributed.collective;

import java.nio.file.Files;
import java.nio.file.Path;

import org.attn4j.distributed.transport.AeronTransport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A worker process for the tests with real processes over Aeron (started by {@link
 * org.attn4j.distributed.launch.LocalLauncher}, configured by the environment). Modes:
 *
 * <ul>
 *   <li>{@code checks DIR}: every {@link CollectiveChecks} check in float32 and float64; prints
 *       {@code VERDICT rank R OK (N checks)} and exits 0, or {@code VERDICT rank R FAIL ...} and exits 1.</li>
 *   <li>{@code die DEAD}: a barrier, then a 16 MB all-gather in which rank DEAD halts (exit code 3) right after
 *       posting its send; every other rank prints {@code FAILED rank R: message} and exits 2 (0 if it somehow
 *       succeeded).</li>
 * </ul>
 */
public final class CollectiveWorker {

    private CollectiveWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) throws Exception {
        int code;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            code = switch (args[0]) {
                case "checks" -> checks(t, Path.of(args[1]));
                case "die" -> die(t, Integer.parseInt(args[1]));
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            };
        }
        System.out.flush();
        System.exit(code);
    }

    private static int checks(AeronTransport t, Path scratch) throws Exception {
        int n = 0;
        try {
            for (DataType type : new DataType[] {DataType.FLOAT, DataType.DOUBLE}) {
                for (CollectiveChecks check : CollectiveChecks.values()) {
                    Path dir = Files.createDirectories(scratch.resolve(check + "-" + type));
                    check.run(t, type, dir);
                    n++;
                }
            }
            Communicator.world(t).barrier();        // nobody closes while another still needs its messages
            System.out.println("VERDICT rank " + t.rank() + " OK (" + n + " checks, " + t.traffic().total()
                    + " bytes sent, " + t.droppedMessages() + " dropped)");
            return 0;
        } catch (Throwable e) {
            System.out.println("VERDICT rank " + t.rank() + " FAIL after " + n + " checks: " + e);
            e.printStackTrace(System.out);
            return 1;
        }
    }

    private static int die(AeronTransport t, int dead) {
        Communicator c = Communicator.world(t);
        c.barrier();
        CollectiveHandle<?> h = c.allGatherAsync(Nd4j.ones(DataType.FLOAT, 4 << 20));
        if (t.rank() == dead) {
            System.out.println("rank " + dead + " halts now");
            System.out.flush();
            Runtime.getRuntime().halt(3);
        }
        try {
            h.join();
            System.out.println("rank " + t.rank() + ": the all-gather succeeded without rank " + dead);
            return 0;
        } catch (CollectiveException e) {
            System.out.println("FAILED rank " + t.rank() + ": " + e.getMessage());
            return 2;
        }
    }
}
