package org.attn4j.distributed.collective;

import java.nio.file.Files;
import java.nio.file.Path;

import org.attn4j.distributed.launch.WorkerEnvironment;
import org.attn4j.distributed.transport.AeronTransport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
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
 *   <li>{@code die host-driver}: as {@code die}, the rank that runs the host's shared media driver halting (it
 *       prints {@code rank R halts now}); exits 4 everywhere if no rank runs one.</li>
 *   <li>{@code lose-driver}: rank 1 starts its transport first (the others 2 s later), so it runs the host's
 *       shared media driver (exit 4 everywhere if not); after a barrier every other rank waits to receive from
 *       rank 1, sending nothing, and rank 1 halts instead (exit code 3). The others print
 *       {@code FAILED rank R: message} and exit 2.</li>
 * </ul>
 */
public final class CollectiveWorker {

    private CollectiveWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) throws Exception {
        if (args[0].equals("lose-driver") && !"1".equals(System.getenv(WorkerEnvironment.RANK))) {
            Thread.sleep(2000);                            // rank 1 gets to the host driver first and launches it
        }
        int code;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            code = switch (args[0]) {
                case "checks" -> checks(t, Path.of(args[1]));
                case "lose-driver" -> loseDriver(t);
                case "die" -> die(t, args[1].equals("host-driver") ? driverHost(t) : Integer.parseInt(args[1]));
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
                    + " bytes sent, " + t.droppedMessages() + " dropped, " + t.singleCopyMessages() + " by single copy)");
            return 0;
        } catch (Throwable e) {
            System.out.println("VERDICT rank " + t.rank() + " FAIL after " + n + " checks: " + e);
            e.printStackTrace(System.out);
            return 1;
        }
    }

    /** The rank that runs the host's shared media driver, agreed by every rank; exits 4 when none does. */
    private static int driverHost(AeronTransport t) {
        INDArray mine = Nd4j.createFromArray(new int[] {t.hostsMediaDriver() ? t.rank() : -1});
        int host = -1;
        for (INDArray x : Communicator.world(t).allGather(mine)) {
            host = Math.max(host, x.getInt(0));
        }
        if (host < 0) {
            System.out.println("no rank runs a shared media driver");
            System.out.flush();
            System.exit(4);
        }
        return host;
    }

    private static int loseDriver(AeronTransport t) {
        if (driverHost(t) != 1) {
            System.out.println("rank 1 does not run the host driver");
            return 4;
        }
        Communicator c = Communicator.world(t);
        c.barrier();
        if (t.rank() == 1) {
            System.out.println("rank 1 halts now");
            System.out.flush();
            Runtime.getRuntime().halt(3);
        }
        try {
            c.sendRecvAsync(Communicator.NONE, null, 1).join();
            System.out.println("rank " + t.rank() + ": received from rank 1 after it halted");
            return 0;
        } catch (CollectiveException e) {
            System.out.println("FAILED rank " + t.rank() + ": " + e.getMessage());
            return 2;
        }
    }

    private static int die(AeronTransport t, int dead) {
        Communicator c = Communicator.world(t);
        c.barrier();
        CollectiveHandle<java.util.List<INDArray>> h = c.allGatherAsync(Nd4j.ones(DataType.FLOAT, 4 << 20));
        if (t.rank() == dead) {
            System.out.println("rank " + dead + " halts now");
            System.out.flush();
            Runtime.getRuntime().halt(3);
        }
        try {
            java.util.List<INDArray> gathered = h.join();
            // Possible when the dead rank's block had gone out (or been read) before it halted: then every block
            // is in place.
            boolean complete = gathered.size() == t.worldSize() && gathered.stream().allMatch(b ->
                    b.length() == 4 << 20 && b.minNumber().doubleValue() == 1 && b.maxNumber().doubleValue() == 1);
            System.out.println("rank " + t.rank() + ": the all-gather succeeded after rank " + dead + " halted, "
                    + (complete ? "every block in place" : "BLOCKS MISSING"));
            return complete ? 0 : 5;
        } catch (CollectiveException e) {
            System.out.println("FAILED rank " + t.rank() + ": " + e.getMessage());
            return 2;
        }
    }
}
