package org.attn4j.distributed.collective;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.LockSupport;
import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.testing.ReferenceAttention;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * The collective checks, one suite for both transports: every rank runs a check on its own transport and asserts
 * its own result against the single-process answer, which it computes from the seeded inputs of all ranks.
 * {@link CommunicatorTest} runs them on in-JVM ranks, {@link CollectiveWorker} in real processes over Aeron.
 */
enum CollectiveChecks {

    ALL_GATHER {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            INDArray mine = input(me, type, me + 1, 3);
            long before = t.traffic().total();
            CollectiveHandle<List<INDArray>> h = Communicator.world(t).allGatherAsync(mine);
            List<INDArray> out = h.join();
            assertSame(mine, out.get(me), "this rank's own block is its input");
            long bytes = 0;
            for (int j = 0; j < p; j++) {
                assertClose(input(j, type, j + 1, 3), out.get(j), type, "block " + j);
                bytes += j == Math.floorMod(me + 1, p) ? 0 : (j + 1) * 3L * type.width();
            }
            assertEquals(bytes, h.bytesSent(), "a member sends every block but its successor's");
            assertEquals(bytes, t.traffic().total() - before, "the transport counted the same bytes");
        }
    },

    REDUCE_SCATTER {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            CollectiveHandle<INDArray> h = Communicator.world(t).reduceScatterAsync(input(me, type, 2L * p, 5));
            INDArray out = h.join();
            INDArray sum = Nd4j.zeros(DataType.DOUBLE, 2, 5);
            for (int r = 0; r < p; r++) {
                sum.addi(input(r, type, 2L * p, 5).get(NDArrayIndex.interval(2L * me, 2L * me + 2), NDArrayIndex.all())
                        .castTo(DataType.DOUBLE));
            }
            assertClose(sum, out, type, "reduced block");
            assertEquals((p - 1) * 2L * 5 * type.width(), h.bytesSent(), "ring reduce-scatter sends P - 1 blocks");
        }
    },

    /**
     * All-gather and reduce-scatter into the caller's outputs, whole and with 64 KiB slices (blocks of 400 KB in
     * float32, 800 KB in float64: 7 and 13 slices), where the ring overlaps its steps slice by slice.
     */
    INTO_OUTPUTS {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            for (long slice : new long[] {RingSlices.SLICE_BYTES, 64 << 10}) {
                intoOutputs(t, type, slice);
            }
        }

        private void intoOutputs(Transport t, DataType type, long slice) {
            int p = t.worldSize();
            int me = t.rank();
            long rows = 100;
            Communicator c = Communicator.world(t);
            INDArray out = Nd4j.create(type, rows * p, 1024);
            CollectiveHandle<INDArray> g = c.allGatherAsync(input(me, type, rows, 1024), out, slice);
            assertSame(out, g.join(), "the all-gather returns the caller's output");
            for (int j = 0; j < p; j++) {
                assertClose(input(j, type, rows, 1024), out.get(NDArrayIndex.interval(rows * j, rows * j + rows),
                        NDArrayIndex.all()), type, "block " + j);
            }
            assertEquals((p - 1) * rows * 1024 * type.width(), g.bytesSent(), "P - 1 blocks, in slices");
            // In place: this member's block is already the output's (MPI_IN_PLACE).
            INDArray gathered = Nd4j.create(type, rows * p, 1024);
            INDArray own = gathered.get(NDArrayIndex.interval(rows * me, rows * me + rows), NDArrayIndex.all());
            own.assign(input(me, type, rows, 1024));
            assertSame(gathered, c.allGatherAsync(own, gathered, slice).join());
            assertEquals(out, gathered, "in place, the same elements");
            INDArray mine = Nd4j.create(type, rows, 1024);
            CollectiveHandle<INDArray> r = c.reduceScatterAsync(input(me, type, rows * p, 1024), mine, slice);
            assertSame(mine, r.join(), "the reduce-scatter returns the caller's output");
            INDArray sum = Nd4j.zeros(DataType.DOUBLE, rows, 1024);
            for (int q = 0; q < p; q++) {
                sum.addi(input(q, type, rows * p, 1024).get(NDArrayIndex.interval(rows * me, rows * me + rows),
                        NDArrayIndex.all()).castTo(DataType.DOUBLE));
            }
            assertClose(sum, mine, type, "reduced block");
            assertEquals((p - 1) * rows * 1024 * type.width(), r.bytesSent(), "P - 1 blocks, in slices");
            // Again with other values: the scratch blocks the communicator kept from the first call are written
            // afresh, nothing of the first call's partial sums is left in the result.
            INDArray again = Nd4j.create(type, rows, 1024);
            c.reduceScatterAsync(input(me + p, type, rows * p, 1024), again, slice).join();
            INDArray sumAgain = Nd4j.zeros(DataType.DOUBLE, rows, 1024);
            for (int q = 0; q < p; q++) {
                sumAgain.addi(input(q + p, type, rows * p, 1024).get(
                        NDArrayIndex.interval(rows * me, rows * me + rows), NDArrayIndex.all()).castTo(DataType.DOUBLE));
            }
            assertClose(sumAgain, again, type, "reduced block, second call");
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> c.allGatherAsync(input(me, type, 2, 3), Nd4j.create(type, 2 * p + 1, 3)));
            assertTrue(e.getMessage().contains("expected an output of " + 6 * p + " " + type), e.getMessage());
        }
    },

    /**
     * Sliced all-gather and reduce-scatter with member 0 starting late: every slice its predecessor sends it is
     * there before it posts its receives, and it must still send its own block first and forward those after,
     * in order.
     */
    LATE_MEMBER {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            long rows = 40;
            long slice = 16 << 10;
            Communicator c = Communicator.world(t);
            if (me == 0) {
                LockSupport.parkNanos(150_000_000L);
            }
            INDArray out = Nd4j.create(type, rows * p, 1024);
            c.allGatherAsync(input(me, type, rows, 1024), out, slice).join();
            for (int j = 0; j < p; j++) {
                assertClose(input(j, type, rows, 1024), out.get(NDArrayIndex.interval(rows * j, rows * j + rows),
                        NDArrayIndex.all()), type, "block " + j);
            }
            if (me == 0) {
                LockSupport.parkNanos(150_000_000L);
            }
            INDArray mine = Nd4j.create(type, rows, 1024);
            c.reduceScatterAsync(input(me, type, rows * p, 1024), mine, slice).join();
            INDArray sum = Nd4j.zeros(DataType.DOUBLE, rows, 1024);
            for (int q = 0; q < p; q++) {
                sum.addi(input(q, type, rows * p, 1024).get(NDArrayIndex.interval(rows * me, rows * me + rows),
                        NDArrayIndex.all()).castTo(DataType.DOUBLE));
            }
            assertClose(sum, mine, type, "reduced block");
        }
    },

    /**
     * The sum all-reduce of an array whose length P divides (a sliced reduce-scatter then all-gather, within the
     * result) and the ring rotation into the caller's buffer, whole and with 64 KiB slices.
     */
    SLICED_ALL_REDUCE_AND_ROTATION {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            for (long slice : new long[] {RingSlices.SLICE_BYTES, 64 << 10}) {
                slicedAllReduceAndRotation(t, type, slice);
            }
        }

        private void slicedAllReduceAndRotation(Transport t, DataType type, long slice) {
            int p = t.worldSize();
            int me = t.rank();
            long rows = 100L * p;
            Communicator c = Communicator.world(t);
            CollectiveHandle<INDArray> h = c.allReduceAsync(input(me, type, rows, 1024), slice);
            INDArray out = h.join();
            INDArray sum = Nd4j.zeros(DataType.DOUBLE, rows, 1024);
            for (int r = 0; r < p; r++) {
                sum.addi(input(r, type, rows, 1024).castTo(DataType.DOUBLE));
            }
            assertClose(sum, out, type, "sum");
            assertEquals(2 * (p - 1) * (rows / p) * 1024 * type.width(), h.bytesSent(),
                    "P - 1 blocks reduced, P - 1 gathered");
            assertEquals(c.broadcast(0, out), out, "every member holds the bits of member 0");
            INDArray into = Nd4j.create(type, 100, 1024);
            int next = Math.floorMod(me + 1, p);
            int previous = Math.floorMod(me - 1, p);
            CollectiveHandle<INDArray> r = c.sendRecvAsync(next, input(me, type, 100, 1024), previous, into, slice);
            assertSame(into, r.join(), "the rotation returns the caller's buffer");
            assertClose(input(previous, type, 100, 1024), into, type, "the previous member's block");
            assertEquals(p == 1 ? 0 : 100 * 1024 * type.width(), r.bytesSent(), "one block, in slices");
            IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                    () -> c.sendRecvAsync(next, into, previous, Nd4j.create(type, 4, 4).transpose()));
            assertTrue(e.getMessage().contains("expected an output contiguous in C order"), e.getMessage());
        }
    },

    ALL_REDUCE {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            Communicator c = Communicator.world(t);
            CollectiveHandle<INDArray> h = c.allReduceAsync(input(me, type, 7, 3));   // 21: unequal parts
            INDArray out = h.join();
            INDArray sum = Nd4j.zeros(DataType.DOUBLE, 7, 3);
            for (int r = 0; r < p; r++) {
                sum.addi(input(r, type, 7, 3).castTo(DataType.DOUBLE));
            }
            assertClose(sum, out, type, "sum");
            long own = part(21, p, me);
            long next = part(21, p, Math.floorMod(me + 1, p));
            assertEquals(p == 1 ? 0 : (21 - own + 21 - next) * type.width(), h.bytesSent(),
                    "all parts but its own, then all but its successor's");
            assertEquals(c.broadcast(0, out), out, "every member holds the bits of member 0");
        }
    },

    BROADCAST {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            Communicator c = Communicator.world(t);
            for (int root = 0; root < p; root++) {
                INDArray mine = t.rank() == root ? input(root, type, 4, 2) : null;
                CollectiveHandle<INDArray> h = c.broadcastAsync(root, mine);
                assertEquals(input(root, type, 4, 2), h.join(), "root " + root);
                double total = c.allReduce(Nd4j.scalar((double) h.bytesSent())).getDouble(0);
                assertEquals((p - 1) * 8L * type.width(), (long) total, "root " + root + ": P - 1 copies in all");
            }
        }
    },

    BARRIER {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            Communicator c = Communicator.world(t);
            long before = t.traffic().total();
            for (int round = 0; round < 3; round++) {
                if (t.rank() == round % p) {
                    sleep(100);                              // the late one
                }
                touch(scratch.resolve(type + "-round" + round + "-rank" + t.rank()));
                c.barrier();
                for (int r = 0; r < p; r++) {
                    assertTrue(Files.exists(scratch.resolve(type + "-round" + round + "-rank" + r)),
                            "left barrier " + round + " before rank " + r + " arrived");
                }
            }
            assertEquals(0, t.traffic().total() - before, "a barrier carries no payload");
        }
    },

    SEND_RECV {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            Communicator c = Communicator.world(t);
            Group g = c.group();
            INDArray ring = c.sendRecv(g.next(), input(me, type, 3), g.previous());
            assertClose(input(Math.floorMod(me - 1, p), type, 3), ring, type, "ring");
            INDArray pipe = c.sendRecv(me == p - 1 ? Communicator.NONE : me + 1, input(me, type, 2),
                    me == 0 ? Communicator.NONE : me - 1);
            if (me == 0) {
                assertNull(pipe, "the first stage receives nothing");
            } else {
                assertClose(input(me - 1, type, 2), pipe, type, "pipeline");
            }
        }
    },

    SUB_GROUPS {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            int p = t.worldSize();
            int me = t.rank();
            if (p == 4) {
                // 2 x 2 grid: rows {0,1} {2,3} on channel 1, columns {0,2} {1,3} on channel 2, all in flight at once.
                int a = me / 2 * 2;
                int col = me % 2;
                Communicator row = Communicator.of(t, Group.of(t, a, a + 1), 1);
                Communicator column = Communicator.of(t, Group.of(t, col, col + 2), 2);
                CollectiveHandle<INDArray> rowSum = row.allReduceAsync(input(me, type, 5, 2));
                CollectiveHandle<List<INDArray>> colGather = column.allGatherAsync(input(10 + me, type, 3));
                CollectiveHandle<INDArray> rowSum2 = row.allReduceAsync(input(20 + me, type, 4));
                List<INDArray> gathered = colGather.join();
                assertClose(input(20 + a, type, 4).add(input(20 + a + 1, type, 4)), rowSum2.join(), type, "row sum 2");
                assertClose(input(a, type, 5, 2).add(input(a + 1, type, 5, 2)), rowSum.join(), type, "row sum");
                assertClose(input(10 + col, type, 3), gathered.get(0), type, "column gather 0");
                assertClose(input(10 + col + 2, type, 3), gathered.get(1), type, "column gather 1");
            } else {
                // Group [P-1, 0] in reverse order, and for P = 3 rank 1 alone in [1], concurrently on channel 1.
                int[] members = p == 1 ? new int[] {0}
                        : me == 0 || me == p - 1 ? new int[] {p - 1, 0} : new int[] {me};
                Communicator c = Communicator.of(t, Group.of(t, members), 1);
                INDArray sum = c.allReduce(input(me, type, 6));
                INDArray expected = Nd4j.zeros(type, 6);
                for (int m : members) {
                    expected.addi(input(m, type, 6));
                }
                assertClose(expected, sum, type, "sum over " + java.util.Arrays.toString(members));
                List<INDArray> all = c.allGather(input(me, type, 2));
                for (int i = 0; i < members.length; i++) {
                    assertClose(input(members[i], type, 2), all.get(i), type, "gathered " + i);
                }
            }
        }
    },

    ATTENTION_MERGE {
        @Override
        void run(Transport t, DataType type, Path scratch) {
            // Rank r holds scores s_r [rows, k] and values v_r [k, d] of its own keys; its partial is
            // (softmax(s_r) v_r, logsumexp(s_r)). Merged over all ranks: attention over all P k keys.
            int p = t.worldSize();
            int rows = 2 * p + 1;
            Communicator c = Communicator.world(t);
            INDArray[] mine = partial(input(t.rank(), type, rows, 4), input(100 + t.rank(), type, 4, 3));
            INDArray[] all = c.allReduce(Reduction.attentionMerge(), mine);
            List<INDArray[]> blocks = new ArrayList<>();
            for (int j = 0; j < p; j++) {
                blocks.add(mine);
            }
            INDArray[] scattered = c.reduceScatter(Reduction.attentionMerge(), blocks);
            INDArray[] s = new INDArray[p];
            INDArray[] v = new INDArray[p];
            for (int r = 0; r < p; r++) {
                s[r] = input(r, type, rows, 4).castTo(DataType.DOUBLE);
                v[r] = input(100 + r, type, 4, 3).castTo(DataType.DOUBLE);
            }
            INDArray[] full = partial(Nd4j.hstack(s), Nd4j.vstack(v));
            assertClose(full[0], all[0], type, "O");
            assertClose(full[1], all[1], type, "LSE");
            assertClose(full[0], scattered[0], type, "O by reduce-scatter");
        }
    };

    static final long SEED = 20240611L;

    /** Runs the check as this rank; throws an {@link AssertionError} naming what differs. */
    abstract void run(Transport t, DataType type, Path scratch);

    /** Rank r's input {@code salt}: seeded, the same in every process. */
    static INDArray input(int salt, DataType type, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(SEED + 31L * salt).nextGaussian(shape).castTo(type);
    }

    private static long part(long n, int parts, int j) {
        return Reduction.partStart(n, parts, j + 1) - Reduction.partStart(n, parts, j);
    }

    /** Equal shape and type, and values within 1e-5 (float32) or 1e-12 (float64) of the magnitude. */
    static void assertClose(INDArray expected, INDArray actual, DataType type, String what) {
        assertEquals(type, actual.dataType(), what + ": type");
        assertArrayEquals(expected.shape(), actual.shape(), what + ": shape");
        INDArray e = expected.castTo(DataType.DOUBLE);
        double err = e.sub(actual.castTo(DataType.DOUBLE)).amaxNumber().doubleValue();
        double scale = Math.max(1, e.amaxNumber().doubleValue());
        double tolerance = type == DataType.FLOAT ? 1e-5 : 1e-12;
        assertTrue(err <= tolerance * scale, what + ": max abs error " + err + " (seed " + SEED + ")");
    }

    /** {@code (softmax(s) v, logsumexp(s))} row by row in the type of {@code s}, by the float64 reference. */
    private static INDArray[] partial(INDArray s, INDArray v) {
        INDArray[] ov = ReferenceAttention.overScores(s, v);
        return new INDArray[] {ov[0].castTo(s.dataType()), ov[1].castTo(s.dataType())};
    }

    private static void touch(Path file) {
        try {
            Files.createFile(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
