package org.attn4j.distributed.launch;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import org.attn4j.distributed.transport.AeronTransport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Workers of the job-token test, by {@code ATTN4J_TEST_ROLE}: the {@code victim} (rank 0) waits until its
 * transport has dropped foreign messages, then takes the array rank 1 sends under tag 7 and checks it is the
 * genuine one; the {@code genuine} rank 1 sends it when told; the {@code intruder} claims to be rank 1 with
 * another token and sends poison under tag 7 to rank 0, and keeps its transport open until the victim has
 * dropped enough (the victim creates the file {@code ATTN4J_TEST_DROPS_SEEN} names). Each prints
 * {@code VERDICT ...} and exits 0 or 1.
 */
public final class TokenWorker {

    static final int DATA_TAG = 7;
    private static final int GO_TAG = 1;

    private TokenWorker() {
    }

    /** The file the victim creates once it has dropped enough of the intruder's messages. */
    private static Path dropsSeen() {
        return Path.of(System.getenv("ATTN4J_TEST_DROPS_SEEN"));
    }

    /** The array the genuine rank 1 sends; the intruder sends its negation. */
    static INDArray genuine() {
        return Nd4j.linspace(1, 1000, 1000, DataType.FLOAT);
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) throws Exception {
        String role = System.getenv("ATTN4J_TEST_ROLE");
        int code;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            code = switch (role) {
                case "victim" -> victim(t);
                case "genuine" -> genuineRank(t);
                case "intruder" -> intruder(t);
                default -> throw new IllegalArgumentException("unknown role " + role);
            };
        }
        System.out.flush();
        System.exit(code);
    }

    private static int victim(AeronTransport t) throws Exception {
        // The intruder's HELLOs must be dropped (it sends them again and again, never acknowledged), and its 5 poison
        // arrays never leave it: wait for 6 drops, then check that only the genuine array arrives.
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (t.droppedMessages() < 6 && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        long dropped = t.droppedMessages();
        Files.createFile(dropsSeen());
        t.send(1, GO_TAG, Nd4j.zeros(DataType.FLOAT, 1)).join();
        INDArray got = t.receive(1, DATA_TAG).join();
        // Nothing else may be queued under the data tag: no poison got through before or after the genuine array.
        boolean nothingElse;
        try {
            t.receive(1, DATA_TAG).get(2, java.util.concurrent.TimeUnit.SECONDS);
            nothingElse = false;
        } catch (java.util.concurrent.TimeoutException expected) {
            nothingElse = true;
        } catch (java.util.concurrent.ExecutionException e) {
            // Rank 1 closes once it has sent; messages queued before its goodbye would still have been delivered.
            nothingElse = e.getCause() instanceof org.attn4j.distributed.transport.PeerFailedException f
                    && f.peerClosed();
        }
        boolean ok = dropped >= 6 && got.equals(genuine()) && nothingElse;
        System.out.println("VERDICT victim " + (ok ? "OK" : "FAIL") + ": dropped " + dropped + " foreign messages, "
                + "received " + (got.equals(genuine()) ? "the genuine array" : "a wrong array " + got)
                + (nothingElse ? "" : " and another array after it"));
        t.receive(1, GO_TAG).join();                      // rank 1 leaves only after this
        return ok ? 0 : 1;
    }

    private static int genuineRank(AeronTransport t) {
        t.receive(0, GO_TAG).join();
        t.send(0, DATA_TAG, genuine()).join();
        t.send(0, GO_TAG, Nd4j.zeros(DataType.FLOAT, 1)).join();
        System.out.println("VERDICT genuine OK");
        return 0;
    }

    private static int intruder(AeronTransport t) throws InterruptedException {
        List<CompletableFuture<Void>> sent = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            sent.add(t.send(0, DATA_TAG, genuine().neg()));
            Thread.sleep(100);
        }
        // Open until the victim has dropped its HELLOs (its transport may start seconds after this one).
        long deadline = System.nanoTime() + 30_000_000_000L;
        while (!Files.exists(dropsSeen()) && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        // The victim never acknowledges this transport's HELLO, so nothing may have left; close fails the sends.
        long handed = sent.stream().filter(f -> f.isDone() && !f.isCompletedExceptionally()).count();
        System.out.println("VERDICT intruder done: " + handed + " of 5 poison arrays handed to the wire");
        return 0;
    }
}
