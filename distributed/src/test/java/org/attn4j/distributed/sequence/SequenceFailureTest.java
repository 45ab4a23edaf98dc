package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A worker that dies in the middle of a sequence-parallel forward pass (at its first send) makes every other
 * worker fail naming it, each learning of the death from the transport or from a notice, so none names a live
 * neighbour after its own 20 s transport timeout. ATTENTION2D and -O run three communicators per worker (world,
 * row, column): the worker that notices the death on one of them must fail its calls on the others as well, since
 * the live members it waits on there give up on hearing its notice. A loaded machine may be slow, hence the
 * generous wait.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SequenceFailureTest {

    @ParameterizedTest
    @MethodSource("org.attn4j.distributed.sequence.SequenceTesting#algorithms")
    void everySurvivorNamesTheDeadRank(SequenceAlgorithm algorithm) throws Exception {
        int p = 4;
        int n = 32;
        SequenceAlgorithm.Settings plain = SequenceAlgorithm.Settings.of(p, n, true).withHeads(4, 4);
        SequenceAlgorithm.Settings s = algorithm.name().equals("wallfacer") ? plain.withOption("team", 2) : plain;
        SequenceLayout layout = algorithm.layout(s);
        INDArray q = SequenceTesting.randn(1, DataType.DOUBLE, 1, 4, n, 8);
        Duration timeout = Duration.ofSeconds(20);
        long[] tookMs = new long[p];
        try {
            List<Throwable> results = Ranks.runInJvm(p, timeout, Duration.ofSeconds(50), t -> {
                long start = System.nanoTime();
                // Rank 2 runs the forward pass too, and dies as it sends its first message.
                Transport mine = t.rank() == 2 ? new DiesOnFirstSend((InJvmTransport) t) : t;
                SequenceParallelAttention<?> a = algorithm.create(mine, s);
                INDArray local = layout.shard(q, t.rank(), p);
                try {
                    a.forward(local, local, local, 0.3);
                    return null;
                } catch (RuntimeException e) {
                    return t.rank() == 2 ? null : e;
                } finally {
                    tookMs[t.rank()] = (System.nanoTime() - start) / 1_000_000;
                }
            });
            for (int r : new int[] {0, 1, 3}) {
                Throwable e = results.get(r);
                if (algorithm == SequenceAlgorithm.byName("lasp") && r < 2) {
                    // Causal LASP: ranks 0 and 1 come before rank 2 in the chain and need nothing from it.
                    continue;
                }
                assertNotNull(e, algorithm + " rank " + r + " finished although rank 2 died");
                assertTrue(String.valueOf(e.getMessage()).contains("rank 2"), algorithm + " rank " + r + ": " + e);
                // From a notice, not from its own wait: well within the transport timeout.
                assertTrue(tookMs[r] < timeout.toMillis() / 2, algorithm + " rank " + r + " failed after "
                        + tookMs[r] + " ms, expected well under the " + timeout.toMillis() + " ms transport timeout: "
                        + e);
            }
        } catch (java.util.concurrent.TimeoutException e) {
            fail(algorithm + ": a survivor hung instead of failing: " + e.getMessage());
        }
    }

    /** A rank's transport that kills it at its first send: a worker dying in the middle of a pass. */
    private static final class DiesOnFirstSend implements Transport {
        private final InJvmTransport inner;

        DiesOnFirstSend(InJvmTransport inner) {
            this.inner = inner;
        }

        @Override
        public int rank() {
            return inner.rank();
        }

        @Override
        public int worldSize() {
            return inner.worldSize();
        }

        @Override
        public java.util.concurrent.CompletableFuture<Void> send(int peer, int tag, INDArray array) {
            inner.kill();
            return inner.send(peer, tag, array);
        }

        @Override
        public java.util.concurrent.CompletableFuture<INDArray> receive(int peer, int tag) {
            return inner.receive(peer, tag);
        }

        @Override
        public org.attn4j.distributed.transport.TrafficCounter traffic() {
            return inner.traffic();
        }

        @Override
        public Duration timeout() {
            return inner.timeout();
        }

        @Override
        public void close() {
            inner.close();
        }
    }
}
