package org.attn4j.distributed.collective;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import org.attn4j.distributed.transport.ArrayCopy;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * The ring all-gather, sum reduce-scatter and sum all-reduce of equal blocks into the caller's output, and the
 * ring rotation of a block into the caller's buffer, in slices. Each block is cut into slices of at most
 * {@link #SLICE_BYTES}, and the steps overlap slice by slice: a member forwards (or adds to and forwards) slice
 * {@code k} of a step as soon as it has arrived, while the later slices of that step are still on the way, as
 * Gloo's and NCCL's rings do. Every receive of the call is posted at the start, each
 * into its place in the output (or in a scratch block for a reduce-scatter's partial sums, where the transport
 * adds this member's share as it reads the message: {@code Transport.receiveSum}), so the transport writes the
 * elements straight where they belong; a member's sends to its successor leave in (step, slice) order,
 * the order in which the successor's receives match them.
 *
 * <pre>
 *   all-gather, step s = 0 .. P-2:      member i sends block i-s to i+1, receives block i-s-1 from i-1
 *   reduce-scatter, step s = 0 .. P-2:  member i sends its partial of block i-s-1, receives the partial of block
 *                                       i-s-2 and adds its own share of that block to it
 * </pre>
 */
final class RingSlices {

    /**
     * The largest slice, bytes. On the 2-core benchmark machine, where the copies and not the latency bound a
     * ring, slices of 512 KiB to 8 MiB measured no faster than whole blocks (docs/distributed.md); blocks are cut
     * only above this size, where one slice in flight while the next is copied pays off on more cores.
     */
    static final long SLICE_BYTES = 8 << 20;

    private RingSlices() {
    }

    /**
     * @param own this member's block, read only
     * @param out P blocks of {@code own}'s size one after the other (C order): member j's lands at block j
     * @return {@code out}
     */
    static CompletableFuture<INDArray> allGather(Exchange<?> ex, INDArray own, INDArray out, int phase,
                                                 long sliceBytes) {
        long n = own.length();
        INDArray flat = flat(out);
        INDArray mine = flat(own);
        // This member's block goes out from its own array, and is copied into its place in the output only once
        // every receive and send of the ring is posted: the copy overlaps the other members' blocks arriving.
        CompletableFuture<Void> ring = gather(ex, flat, mine, n, phase, sliceBytes);
        if (n > 0) {
            ArrayCopy.copy(mine, block(flat, ex.group().index(), n));
        }
        return ring.thenApply(v -> out);
    }

    /**
     * Sum all-reduce as MPI's and NCCL's rings do it: a sliced reduce-scatter (phase 0) whose sums land in this
     * member's block of {@code out}, then a sliced all-gather (phase 1) of those blocks within {@code out}. Every
     * member ends with the same bits (each block is summed once, by its owner). The reduce-scatter's middle steps
     * keep their partial sums in the blocks of {@code out} the all-gather fills later (step {@code s}'s partial
     * of block {@code i - s - 2} in that very block), so the call needs no scratch; the all-gather starts once
     * the transport has read every partial sent.
     *
     * @param array this member's value, read only; its length a multiple of P
     * @param out   an array of {@code array}'s length, contiguous in C order
     * @return {@code out}
     */
    static CompletableFuture<INDArray> allReduce(Exchange<?> ex, INDArray array, INDArray out, long sliceBytes) {
        int p = ex.group().size();
        int i = ex.group().index();
        long n = array.length() / p;
        INDArray flat = flat(out);
        INDArray[] partial = new INDArray[p - 1];
        for (int s = 0; s < p - 1; s++) {
            partial[s] = block(flat, Math.floorMod(s == p - 2 ? i : i - s - 2, p), n);
        }
        return reduceScatter(ex, array, partial, 0, sliceBytes)
                .thenCompose(v -> ex.afterSends())
                .thenCompose(v -> gather(ex, flat, block(flat, i, n), n, 1, sliceBytes))
                .thenApply(v -> out);
    }

    /**
     * The all-gather's ring on {@code flat}: posts every receive into its place, sends {@code mine} (this member's
     * block, {@code n} elements, read only) and forwards each received slice; the elements of {@code mine} are not
     * written into {@code flat} here.
     */
    private static CompletableFuture<Void> gather(Exchange<?> ex, INDArray flat, INDArray mine, long n, int phase,
                                                  long sliceBytes) {
        Group g = ex.group();
        int p = g.size();
        int i = g.index();
        if (p == 1) {
            return CompletableFuture.completedFuture(null);
        }
        int k = sliceCount(n, flat.dataType().width(), sliceBytes);
        List<List<CompletableFuture<INDArray>>> received = new ArrayList<>();
        for (int s = 0; s < p - 1; s++) {
            INDArray block = block(flat, Math.floorMod(i - s - 1, p), n);
            List<CompletableFuture<INDArray>> step = new ArrayList<>();
            for (int j = 0; j < k; j++) {
                step.add(ex.receiveInto(g.previous(), phase, slice(block, n, k, j)));
            }
            received.add(step);
        }
        for (int j = 0; j < k; j++) {
            ex.send(g.next(), phase, slice(mine, n, k, j));
        }
        CompletableFuture<Void> forwarded = CompletableFuture.completedFuture(null);
        for (int s = 0; s < p - 2; s++) {
            for (int j = 0; j < k; j++) {
                forwarded = forwarded.thenCombine(received.get(s).get(j), (v, slice) -> {
                    ex.send(g.next(), phase, slice);
                    return null;
                });
            }
        }
        List<CompletableFuture<?>> all = new ArrayList<>();
        received.forEach(all::addAll);
        all.add(forwarded);
        return CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
    }

    /**
     * Sends {@code array} to the member at {@code to} and receives from {@code from} into {@code into}, both in
     * slices (one receive posted per slice, each written straight into its place): a ring rotation of equal
     * blocks, as the sequence-parallel algorithms' K/V. The sender and the receiver cut the same number of elements
     * into the same slices, so {@code array} on the sender and {@code into} on the receiver must hold as many.
     */
    static CompletableFuture<INDArray> sendReceive(Exchange<?> ex, int to, INDArray array, int from, INDArray into,
                                                   long sliceBytes) {
        if (array != null) {
            long n = array.length();
            INDArray flat = flat(array);
            int k = sliceCount(n, array.dataType().width(), sliceBytes);
            for (int j = 0; j < k; j++) {
                ex.send(to, 0, slice(flat, n, k, j));
            }
        }
        if (into == null) {
            return CompletableFuture.completedFuture(null);
        }
        long n = into.length();
        INDArray flat = flat(into);
        int k = sliceCount(n, into.dataType().width(), sliceBytes);
        CompletableFuture<?>[] received = new CompletableFuture<?>[k];
        for (int j = 0; j < k; j++) {
            received[j] = ex.receiveInto(from, 0, slice(flat, n, k, j));
        }
        return CompletableFuture.allOf(received).thenApply(v -> into);
    }

    /**
     * @param array this member's contribution, P blocks one after the other (C order); read only
     * @param out   where the sum of block {@code i} over the members goes, the size of one block
     * @return {@code out}
     */
    static CompletableFuture<INDArray> reduceScatter(Exchange<?> ex, INDArray array, INDArray out, int phase,
                                                     long sliceBytes) {
        int p = ex.group().size();
        long n = out.length();
        INDArray result = flat(out);
        if (p == 1) {
            ArrayCopy.copy(array, result);
            return CompletableFuture.completedFuture(out);
        }
        // Partial sums of the middle steps land in scratch blocks the communicator keeps between calls
        // (ScratchBlocks); the last step's in the output itself.
        INDArray[] partial = new INDArray[p - 1];
        for (int s = 0; s < p - 2; s++) {
            partial[s] = ex.scratch(out.dataType(), n);
        }
        partial[p - 2] = result;
        return reduceScatter(ex, array, partial, phase, sliceBytes).thenApply(v -> {
            ex.keepAfterSends(List.of(partial).subList(0, p - 2));
            return out;
        });
    }

    /**
     * The reduce-scatter's ring: step {@code s}'s partial sum lands in {@code partial[s]} (a block's size each,
     * contiguous; the last is this member's result) and, but for the last, is forwarded slice by slice.
     *
     * @param array this member's contribution, P blocks one after the other (C order); read only
     */
    private static CompletableFuture<Void> reduceScatter(Exchange<?> ex, INDArray array, INDArray[] partial,
                                                         int phase, long sliceBytes) {
        Group g = ex.group();
        int p = g.size();
        int i = g.index();
        long n = partial[0].length();
        INDArray flat = flat(array);
        int k = sliceCount(n, partial[0].dataType().width(), sliceBytes);
        // Each receive adds this member's share of its block to the partial sum that arrives, as the transport
        // reads it (Transport.receiveSum), so the sum lands in place in one pass.
        List<List<CompletableFuture<INDArray>>> received = new ArrayList<>();
        for (int s = 0; s < p - 1; s++) {
            INDArray local = block(flat, Math.floorMod(i - s - 2, p), n);
            List<CompletableFuture<INDArray>> step = new ArrayList<>();
            for (int j = 0; j < k; j++) {
                step.add(ex.receiveSum(g.previous(), phase, slice(partial[s], n, k, j), slice(local, n, k, j)));
            }
            received.add(step);
        }
        INDArray first = block(flat, Math.floorMod(i - 1, p), n);
        for (int j = 0; j < k; j++) {
            ex.send(g.next(), phase, slice(first, n, k, j));
        }
        CompletableFuture<Void> forwarded = CompletableFuture.completedFuture(null);
        List<CompletableFuture<?>> all = new ArrayList<>();
        for (int s = 0; s < p - 1; s++) {
            for (int j = 0; j < k; j++) {
                CompletableFuture<INDArray> summed = received.get(s).get(j);
                if (s < p - 2) {
                    forwarded = forwarded.thenCombine(summed, (v, x) -> {
                        ex.send(g.next(), phase, x);
                        return null;
                    });
                } else {
                    all.add(summed);
                }
            }
        }
        all.add(forwarded);
        return CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
    }

    /** Slices of a block of {@code n} elements of {@code width} bytes: at most {@code sliceBytes} each, at least one. */
    static int sliceCount(long n, int width, long sliceBytes) {
        long bytes = n * width;
        return (int) Math.max(1, Math.min(n, (bytes + sliceBytes - 1) / sliceBytes));
    }

    private static INDArray block(INDArray flat, int index, long n) {
        return n == 0 ? Nd4j.create(flat.dataType(), 0) : flat.get(NDArrayIndex.interval(index * n, (index + 1) * n));
    }

    private static INDArray slice(INDArray block, long n, int k, int j) {
        if (k == 1) {
            return block;
        }
        long from = Reduction.partStart(n, k, j);
        long to = Reduction.partStart(n, k, j + 1);
        return to == from ? Nd4j.create(block.dataType(), 0) : block.get(NDArrayIndex.interval(from, to));
    }

    /**
     * {@code a}'s elements in C order as one dimension: {@code a} itself when it already is one, so a call makes
     * no view it does not need (each ND4J view costs about 5 us and an object for ND4J's deallocator to track).
     */
    private static INDArray flat(INDArray a) {
        return a.rank() == 1 && (a.length() <= 1 || a.stride(0) == 1) ? a : a.reshape('c', new long[] {a.length()});
    }
}
