package org.attn4j.distributed.training;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.util.Arrays;

/**
 * A {@link TrainingWorker} of which one rank dies in the middle of writing its shard of one checkpoint:
 * {@code args[0]} is {@code STEP:RANK}, the rest are TrainingWorker's. That rank writes half of the shard's bytes
 * into the temporary file, forces them to the device and SIGKILLs its own process, so nothing after the half-written
 * shard runs; every other shard is written as the store writes it.
 */
public final class KilledMidShardWorker {

    private KilledMidShardWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        String[] at = args[0].split(":");
        int step = Integer.parseInt(at[0]);
        int rank = Integer.parseInt(at[1]);
        TrainingWorker.train(Arrays.copyOfRange(args, 1, args.length), (s, r, bytes, file) -> {
            if (s == step && r == rank) {
                writeHalfAndDie(bytes, file);
            } else {
                CheckpointStore.ShardOutput.WHOLE.write(s, r, bytes, file);
            }
        });
    }

    private static void writeHalfAndDie(byte[] bytes, FileChannel file) throws IOException {
        ByteBuffer half = ByteBuffer.wrap(bytes, 0, bytes.length / 2);
        while (half.hasRemaining()) {
            file.write(half);
        }
        file.force(true);
        new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start();
        try {
            Thread.sleep(60_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        throw new IOException("KilledMidShardWorker: SIGKILL to this process did not arrive within 60 s");
    }
}
