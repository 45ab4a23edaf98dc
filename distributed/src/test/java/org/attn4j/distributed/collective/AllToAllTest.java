package org.attn4j.distributed.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.testing.Ranks;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** All-to-all: member i ends with the block every member j addressed to it, for P = 1..4. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AllToAllTest {

    /** The block member {@code from} sends to member {@code to}: distinct values and sizes per pair. */
    static INDArray block(int from, int to) {
        return Nd4j.linspace(1, 3 + from + 2 * to, 3 + from + 2 * to, DataType.DOUBLE).addi(100 * from + 10 * to);
    }

    @ParameterizedTest(name = "P={0}")
    @ValueSource(ints = {1, 2, 3, 4})
    void everyMemberReceivesTheBlockEachMemberAddressedToIt(int p) throws Exception {
        List<List<INDArray>> got = Ranks.runInJvm(p, Duration.ofSeconds(5), Duration.ofSeconds(30), t -> {
            Communicator c = Communicator.world(t);
            List<INDArray> blocks = new ArrayList<>();
            for (int to = 0; to < p; to++) {
                blocks.add(block(t.rank(), to));
            }
            List<INDArray> received = c.allToAll(blocks);
            long expectedBytes = 0;
            for (int to = 0; to < p; to++) {
                expectedBytes += to == t.rank() ? 0 : blocks.get(to).length() * Double.BYTES;
            }
            assertEquals(expectedBytes, c.bytesSent(), "rank " + t.rank() + " volume");
            return received;
        });
        for (int me = 0; me < p; me++) {
            for (int from = 0; from < p; from++) {
                assertEquals(block(from, me), got.get(me).get(from), "member " + me + " from " + from);
            }
        }
    }
}
