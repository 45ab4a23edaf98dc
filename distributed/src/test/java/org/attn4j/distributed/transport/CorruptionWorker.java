package org.attn4j.distributed.transport;

import java.util.concurrent.ExecutionException;

import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A worker process for {@link CorruptionProcessTest}: rank 0 damages the next chunk it sends to rank 1, then
 * sends an intact array; rank 1 must refuse the first (checksum) and receive the second. Prints a verdict line.
 */
public final class CorruptionWorker {

    private CorruptionWorker() {
    }

    /** Runs one rank; exit code 0 with a VERDICT line on success. */
    public static void main(String[] args) throws Exception {
        boolean ok;
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            INDArray first = Nd4j.linspace(1, 4096, 4096, DataType.FLOAT).reshape(64, 64);
            INDArray second = first.mul(2);
            if (t.rank() == 0) {
                t.corruptNextChunk(1);
                t.send(1, 7, first).get();
                t.send(1, 7, second).get();
                t.receive(1, 8).get();                   // rank 1 is done: close only after it
                System.out.println("VERDICT sender done");
                return;
            }
            try {
                t.receive(0, 7).get();
                System.out.println("VERDICT FAILED: the damaged array was delivered");
                ok = false;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof CorruptMessageException)) {
                    throw e;
                }
                System.out.println("VERDICT refused: " + e.getCause().getMessage());
                ok = true;
            }
            INDArray got = t.receive(0, 7).get();
            boolean intact = got.equals(second);
            System.out.println("VERDICT next message intact: " + intact + ", corrupt count " + t.corruptMessages());
            ok = ok && intact;
            t.send(0, 8, Nd4j.scalar(1f)).get();
        }
        // After close: the transport has flushed the acknowledgement and said goodbye.
        System.exit(ok ? 0 : 1);
    }
}
