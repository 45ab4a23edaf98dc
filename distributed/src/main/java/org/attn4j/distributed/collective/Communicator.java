package org.attn4j.distributed.collective;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Function;

import org.attn4j.distributed.transport.PeerFailedException;
import org.attn4j.distributed.transport.Contiguity;
import org.attn4j.distributed.transport.Transport;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Collectives over a {@link Group} of ranks on one {@link Transport}: {@code sendRecv}, ring {@code allGather},
 * ring {@code reduceScatter} and {@code allReduce} with a pluggable {@link Reduction}, {@code broadcast} and
 * {@code barrier}. Each has an asynchronous form returning a {@link CollectiveHandle} (start the exchange of the
 * next block, compute on this one, then join) and a blocking form on top of it.
 *
 * <p>Rules, as in MPI: every member calls the same collectives on its communicator in the same order (calls are
 * numbered, and the number picks the tags, see {@link CollectiveTags}); one communicator's calls are issued from
 * one thread or otherwise ordered. Calls may overlap: up to {@link CollectiveTags#WINDOW} of one communicator
 * may be in flight. Two communicators whose calls may be in flight at the same time and whose groups share a
 * pair of ranks need different channels (disjoint groups, e.g. the rows of a grid, may share one).
 *
 * <p>Sends are non-blocking and every member posts its send before its receive, so no pairing can deadlock,
 * for any group size including 2 and 1. A failure is never a hang: the transport fails a receive from a silent
 * or dead peer within its timeout, and the call fails with a {@link CollectiveException} naming the
 * collective, the group and the peer. The rank that notices tells every other rank ({@code FailureNotices}), so
 * their calls fail at once too, naming the same rank rather than a neighbour that stopped forwarding; so do the
 * calls of its own other communicators (on the same transport), which no notice reaches. After a failed
 * call the members may disagree on where they are, so the communicator refuses further calls.
 *
 * <p>Comm volume: every byte goes through the transport's
 * {@link org.attn4j.distributed.transport.TrafficCounter} under this channel's tags; {@link #bytesSent()} and
 * {@link CollectiveHandle#bytesSent()} give this rank's payload bytes per communicator and per call. Each
 * method documents its volume per member for blocks of {@code b} bytes in a group of {@code P}.
 */
public final class Communicator {

    /** A member index meaning "nobody", for {@link #sendRecvAsync} at the ends of a pipeline. */
    public static final int NONE = -1;

    private static final ExecutorService DEFAULT_EXECUTOR = Executors.newCachedThreadPool(new DaemonThreads());

    private final Transport transport;
    private final Group group;
    private final int channel;
    private final Executor executor;
    private final AtomicInteger inFlight = new AtomicInteger();
    private final LongAdder bytesSent = new LongAdder();
    private final Set<Exchange<?>> live = ConcurrentHashMap.newKeySet();
    private final FailureNotices notices;
    private final ScratchBlocks scratch = new ScratchBlocks();
    private long calls;
    private volatile Throwable failure;

    private Communicator(Transport transport, Group group, int channel, Executor executor) {
        CollectiveTags.checkChannel(channel);
        if (group.worldSize() != transport.worldSize() || group.rank(group.index()) != transport.rank()) {
            throw new IllegalArgumentException("Communicator: " + group + " of a world of " + group.worldSize()
                    + " does not belong to the transport of rank " + transport.rank() + " of "
                    + transport.worldSize());
        }
        this.transport = transport;
        this.group = group;
        this.channel = channel;
        this.executor = executor;
        this.notices = FailureNotices.of(transport);
        notices.register(this);
    }

    /** All ranks of the transport, on the first channel of {@link Channels#SEQUENCE}. */
    public static Communicator world(Transport transport) {
        return new Communicator(transport, Group.world(transport), Channels.SEQUENCE.get(0), DEFAULT_EXECUTOR);
    }

    /**
     * A communicator over {@code group} on {@code channel}.
     *
     * @param channel {@code 0 <= channel < CollectiveTags.CHANNELS}; see the class comment for when two
     *                communicators need different channels
     * @throws IllegalArgumentException if the group was built for another rank or world, or the channel is out
     *                                  of range
     */
    public static Communicator of(Transport transport, Group group, int channel) {
        return new Communicator(transport, group, channel, DEFAULT_EXECUTOR);
    }

    /**
     * As {@link #of(Transport, Group, int)}, running continuations (and reductions) on {@code executor}. The
     * transport completes this communicator's messages on it, from its own threads: the executor must run each
     * task on a thread of its own (a pool, not the caller's thread); tasks it refuses run on the transport's
     * completion thread instead.
     */
    public static Communicator of(Transport transport, Group group, int channel, Executor executor) {
        return new Communicator(transport, group, channel, executor);
    }

    /** The group. */
    public Group group() {
        return group;
    }

    /** The transport. */
    public Transport transport() {
        return transport;
    }

    /** The channel, which fixes this communicator's tag range. */
    public int channel() {
        return channel;
    }

    /** Payload bytes this rank has sent in this communicator's calls (completed and in flight). */
    public long bytesSent() {
        return bytesSent.sum();
    }

    // ---- sendRecv -------------------------------------------------------------------------------------------

    /**
     * Sends {@code array} to member {@code sendTo} while receiving from member {@code receiveFrom} (the ring
     * step of ring attention: {@code sendRecvAsync(group().next(), kv, group().previous())}). Either may be
     * {@link #NONE}, e.g. at the ends of a pipeline; every member still makes the call. Volume: {@code b} if it
     * sends.
     *
     * @param sendTo      a member index or {@link #NONE}
     * @param array       what to send; ignored (may be null) if {@code sendTo} is {@link #NONE}
     * @param receiveFrom a member index or {@link #NONE}
     * @return the received array (a new one), or null if {@code receiveFrom} is {@link #NONE}
     */
    public CollectiveHandle<INDArray> sendRecvAsync(int sendTo, INDArray array, int receiveFrom) {
        if (sendTo != NONE) {
            group.checkIndex(sendTo, "sendRecv destination");
            checkArray("sendRecv", array);
        }
        if (receiveFrom != NONE) {
            group.checkIndex(receiveFrom, "sendRecv source");
        }
        return start("sendRecv", ex -> {
            if (sendTo != NONE) {
                ex.send(sendTo, 0, array);
            }
            return receiveFrom == NONE ? CompletableFuture.completedFuture(null) : ex.receive(receiveFrom, 0);
        });
    }

    /** Blocking {@link #sendRecvAsync}. */
    public INDArray sendRecv(int sendTo, INDArray array, int receiveFrom) {
        return sendRecvAsync(sendTo, array, receiveFrom).join();
    }

    /**
     * As {@link #sendRecvAsync(int, INDArray, int)}, receiving into {@code into}: the transport writes the
     * elements straight into it, and a block above 8 MiB travels in slices (one receive posted per slice). For
     * ring rotations of equal blocks (the sequence-parallel algorithms' K/V): the member that sends to this one
     * sends as many elements as {@code into} holds (else the call fails naming both counts).
     *
     * @param into where the received elements go, contiguous in C order; not read or written by the caller until
     *             the handle completes; ignored (may be null) if {@code receiveFrom} is {@link #NONE}
     * @return {@code into}, or null if {@code receiveFrom} is {@link #NONE}
     */
    public CollectiveHandle<INDArray> sendRecvAsync(int sendTo, INDArray array, int receiveFrom, INDArray into) {
        return sendRecvAsync(sendTo, array, receiveFrom, into, RingSlices.SLICE_BYTES);
    }

    /** As {@link #sendRecvAsync(int, INDArray, int, INDArray)} with slices of at most {@code sliceBytes} (tests). */
    CollectiveHandle<INDArray> sendRecvAsync(int sendTo, INDArray array, int receiveFrom, INDArray into,
                                             long sliceBytes) {
        if (sendTo != NONE) {
            group.checkIndex(sendTo, "sendRecv destination");
            checkArray("sendRecv", array);
        }
        if (receiveFrom != NONE) {
            group.checkIndex(receiveFrom, "sendRecv source");
            if (into == null || !Contiguity.isCContiguous(into)) {
                throw new IllegalArgumentException("Communicator.sendRecv on " + group + ": expected an output "
                        + "contiguous in C order, got " + (into == null ? "null" : "an array of shape "
                        + Arrays.toString(into.shape()) + ", not contiguous"));
            }
        }
        return start("sendRecv", ex -> RingSlices.sendReceive(ex, sendTo, sendTo == NONE ? null : array,
                receiveFrom, receiveFrom == NONE ? null : into, sliceBytes));
    }

    /** Blocking {@link #sendRecvAsync(int, INDArray, int, INDArray)}. */
    public INDArray sendRecv(int sendTo, INDArray array, int receiveFrom, INDArray into) {
        return sendRecvAsync(sendTo, array, receiveFrom, into).join();
    }

    // ---- allGather ------------------------------------------------------------------------------------------

    /**
     * Ring all-gather ({@code RingAllGather}): every member ends with every member's array. Blocks may differ
     * in shape between members. Volume: {@code (P - 1) b} per member for equal blocks.
     *
     * <pre>
     *   step s = 0 .. P-2: member i sends block i-s to i+1 and receives block i-s-1 from i-1
     *   P = 3   step 0: 0 -b0-&gt; 1, 1 -b1-&gt; 2, 2 -b2-&gt; 0    step 1: 0 -b2-&gt; 1, 1 -b0-&gt; 2, 2 -b1-&gt; 0
     * </pre>
     *
     * @return the arrays by member index; this member's entry is {@code array} itself, the others are new
     */
    public CollectiveHandle<List<INDArray>> allGatherAsync(INDArray array) {
        checkArray("allGather", array);
        return start("allGather", ex -> RingAllGather.run(ex, new INDArray[] {array}, 0).thenApply(blocks -> {
            List<INDArray> out = new ArrayList<>(blocks.length);
            for (INDArray[] b : blocks) {
                out.add(b[0]);
            }
            return out;
        }));
    }

    /** Blocking {@link #allGatherAsync}. */
    public List<INDArray> allGather(INDArray array) {
        return allGatherAsync(array).join();
    }

    /**
     * Ring all-gather of equal blocks into {@code out}, as {@code MPI_Allgather}: every member's {@code array} has
     * the same type and number of elements, and member {@code j}'s lands in {@code out}'s elements
     * {@code [j n, (j+1) n)} (C order; for {@code out} of shape {@code [P m, ...]} and blocks {@code [m, ...]}, rows
     * {@code [j m, (j+1) m)}). The transport writes each block straight into {@code out}; blocks above 8 MiB
     * travel in slices, each forwarded as soon as it arrives. Volume: {@code (P - 1) n} elements per member.
     *
     * @param out P times {@code array}'s elements of its type, contiguous in C order; not read or written by the
     *            caller until the handle completes
     * @return {@code out}
     * @throws IllegalArgumentException naming what {@code out} should be
     */
    public CollectiveHandle<INDArray> allGatherAsync(INDArray array, INDArray out) {
        return allGatherAsync(array, out, RingSlices.SLICE_BYTES);
    }

    /** As {@link #allGatherAsync(INDArray, INDArray)} with slices of at most {@code sliceBytes} (tests). */
    CollectiveHandle<INDArray> allGatherAsync(INDArray array, INDArray out, long sliceBytes) {
        checkArray("allGather", array);
        checkOut("allGather", out, array.dataType(), array.length() * group.size());
        return start("allGather", ex -> RingSlices.allGather(ex, array, out, 0, sliceBytes));
    }

    /** Blocking {@link #allGatherAsync(INDArray, INDArray)}. */
    public INDArray allGather(INDArray array, INDArray out) {
        return allGatherAsync(array, out).join();
    }

    // ---- allToAll -------------------------------------------------------------------------------------------

    /**
     * All-to-all (pairwise): member {@code i} sends {@code blocks.get(j)} to member {@code j} and ends with the
     * block every member addressed to it; the sequence-to-head transpose of Ulysses. All sends are posted at once
     * (step {@code s = 1 .. P-1}: to {@code i + s}, from {@code i - s}). Volume: {@code (P - 1) b} per member.
     *
     * @param blocks one array per member index; the entry for this member is returned as it is
     * @return the blocks received, by sending member index
     */
    public CollectiveHandle<List<INDArray>> allToAllAsync(List<INDArray> blocks) {
        if (blocks == null || blocks.size() != group.size()) {
            throw new IllegalArgumentException("Communicator.allToAll on " + group + ": expected " + group.size()
                    + " blocks, one per member, got " + (blocks == null ? "null" : blocks.size()));
        }
        blocks.forEach(b -> checkArray("allToAll", b));
        return start("allToAll", ex -> {
            int p = group.size();
            int me = group.index();
            INDArray[] out = new INDArray[p];
            out[me] = blocks.get(me);
            List<CompletableFuture<Void>> received = new ArrayList<>();
            for (int s = 1; s < p; s++) {
                int to = (me + s) % p;
                int from = (me - s + p) % p;
                ex.send(to, 0, blocks.get(to));
                received.add(ex.receive(from, 0).thenAccept(a -> out[from] = a));
            }
            return CompletableFuture.allOf(received.toArray(new CompletableFuture<?>[0]))
                    .thenApply(v -> java.util.Arrays.asList(out));
        });
    }

    /** Blocking {@link #allToAllAsync}. */
    public List<INDArray> allToAll(List<INDArray> blocks) {
        return allToAllAsync(blocks).join();
    }

    // ---- reduceScatter --------------------------------------------------------------------------------------

    /**
     * Ring reduce-scatter ({@code RingReduceScatter}): member {@code j} ends with the reduction over all
     * members of their {@code blocks.get(j)}. Volume: {@code (P - 1) b} per member for equal blocks.
     *
     * <pre>
     *   step s = 0 .. P-2: member i sends its partial of block i-s-1 to i+1, receives the partial of block
     *                      i-s-2 from i-1 and combines its own contribution into it
     *   P = 3   step 0: 0 -b2-&gt; 1, 1 -b0-&gt; 2, 2 -b1-&gt; 0    step 1: 0 -b1-&gt; 1, 1 -b2-&gt; 2, 2 -b0-&gt; 0
     * </pre>
     *
     * @param blocks this member's contribution to each member's block: {@code P} tuples of the same length,
     *               matching across members in shape and type; read only
     * @return this member's reduced tuple, new arrays
     */
    public CollectiveHandle<INDArray[]> reduceScatterAsync(Reduction reduction, List<INDArray[]> blocks) {
        if (blocks.size() != group.size()) {
            throw new IllegalArgumentException("Communicator.reduceScatter: " + blocks.size() + " blocks for "
                    + group + " of " + group.size() + " members; need one per member");
        }
        int arity = blocks.get(0).length;
        for (INDArray[] b : blocks) {
            if (b.length != arity || arity == 0) {
                throw new IllegalArgumentException("Communicator.reduceScatter: blocks hold " + b.length + " and "
                        + arity + " arrays; every block needs the same count, at least 1");
            }
            for (INDArray a : b) {
                checkArray("reduceScatter", a);
            }
        }
        List<INDArray[]> copy = List.copyOf(blocks);
        return start("reduceScatter(" + reduction.name() + ")", ex -> RingReduceScatter.run(ex, reduction, copy, 0));
    }

    /** Blocking {@link #reduceScatterAsync(Reduction, List)}. */
    public INDArray[] reduceScatter(Reduction reduction, List<INDArray[]> blocks) {
        return reduceScatterAsync(reduction, blocks).join();
    }

    /**
     * Sum reduce-scatter of {@code array} cut along dimension 0 into {@code P} equal blocks: member {@code j}
     * ends with the sum over members of rows {@code [j m, (j+1) m)}, {@code m = size(0) / P}.
     *
     * @throws IllegalArgumentException if {@code size(0)} is not a multiple of {@code P}
     */
    public CollectiveHandle<INDArray> reduceScatterAsync(INDArray array) {
        checkArray("reduceScatter", array);
        int p = group.size();
        if (array.rank() == 0 || array.size(0) % p != 0) {
            throw new IllegalArgumentException("Communicator.reduceScatter: array of shape "
                    + Arrays.toString(array.shape()) + " cannot be cut along dimension 0 into " + p
                    + " equal blocks for " + group);
        }
        long[] shape = array.shape().clone();
        shape[0] /= p;
        return reduceScatterAsync(array, Nd4j.createUninitialized(array.dataType(), shape, 'c'));
    }

    /**
     * Sum reduce-scatter into {@code out}, as {@code MPI_Reduce_scatter_block}: {@code array} holds P equal blocks
     * one after the other (C order), and member {@code j} ends with the sum over members of block {@code j} in
     * {@code out}. Blocks above 8 MiB travel in slices, each added to and forwarded as soon as it arrives; the
     * last step's partial sums are written straight into {@code out}. Volume: {@code (P - 1)} blocks per member.
     * With P > 2 the middle steps' partial sums take {@code P - 2} blocks of scratch, which this communicator
     * keeps for its next call (at most 64 MiB in all) instead of allocating them afresh each time.
     *
     * @param out one block's elements of {@code array}'s type, contiguous in C order
     * @return {@code out}
     * @throws IllegalArgumentException naming what {@code out} should be
     */
    public CollectiveHandle<INDArray> reduceScatterAsync(INDArray array, INDArray out) {
        return reduceScatterAsync(array, out, RingSlices.SLICE_BYTES);
    }

    /** As {@link #reduceScatterAsync(INDArray, INDArray)} with slices of at most {@code sliceBytes} (tests). */
    CollectiveHandle<INDArray> reduceScatterAsync(INDArray array, INDArray out, long sliceBytes) {
        checkArray("reduceScatter", array);
        checkOut("reduceScatter", out, array.dataType(), array.length() / group.size());
        if (array.length() != out.length() * group.size()) {
            throw new IllegalArgumentException("Communicator.reduceScatter on " + group + ": an array of "
                    + array.length() + " elements does not cut into " + group.size() + " blocks of " + out.length());
        }
        return start("reduceScatter(sum)", ex -> RingSlices.reduceScatter(ex, array, out, 0, sliceBytes));
    }

    /** Blocking {@link #reduceScatterAsync(INDArray, INDArray)}. */
    public INDArray reduceScatter(INDArray array, INDArray out) {
        return reduceScatterAsync(array, out).join();
    }

    private void checkOut(String op, INDArray out, DataType type, long elements) {
        if (out == null || out.dataType() != type || out.length() != elements || !Contiguity.isCContiguous(out)) {
            throw new IllegalArgumentException("Communicator." + op + " on " + group + ": expected an output of "
                    + elements + " " + type + " elements contiguous in C order, got " + (out == null ? "null"
                    : out.length() + " " + out.dataType() + " of shape " + Arrays.toString(out.shape())
                    + (Contiguity.isCContiguous(out) ? "" : ", not contiguous")));
        }
    }

    /** Blocking {@link #reduceScatterAsync(INDArray)}. */
    public INDArray reduceScatter(INDArray array) {
        return reduceScatterAsync(array).join();
    }

    // ---- allReduce ------------------------------------------------------------------------------------------

    /**
     * All-reduce as a ring reduce-scatter (phase 0) of the {@link Reduction#split} parts followed by a ring
     * all-gather (phase 1) of the reduced parts: every member ends with the reduction of all members' values.
     * Every member receives the same bits (each part is reduced once, on its owner). Volume: about
     * {@code 2 (P - 1) / P} times the value's bytes per member (exactly: the bytes of all parts but its own
     * plus all parts but that of member {@code index + 1}).
     *
     * @param value this member's tuple, matching across members in shape and type; read only
     * @return the reduced tuple, new arrays
     */
    public CollectiveHandle<INDArray[]> allReduceAsync(Reduction reduction, INDArray... value) {
        if (value.length == 0) {
            throw new IllegalArgumentException("Communicator.allReduce: needs at least one array");
        }
        for (INDArray a : value) {
            checkArray("allReduce", a);
        }
        INDArray[] like = value.clone();
        return start("allReduce(" + reduction.name() + ")", ex -> {
            List<INDArray[]> parts = List.of(reduction.split(like, group.size()));
            return RingReduceScatter.run(ex, reduction, parts, 0)
                    .thenCompose(own -> RingAllGather.run(ex, own, 1))
                    .thenApply(reduced -> {
                        INDArray[] out = reduction.join(reduced, like);
                        List<INDArray> reducedParts = new ArrayList<>();
                        for (INDArray[] part : reduced) {
                            reducedParts.addAll(Arrays.asList(part));
                        }
                        ex.closeAfterSends(reducedParts);
                        return out;
                    });
        });
    }

    /** Blocking {@link #allReduceAsync(Reduction, INDArray...)}. */
    public INDArray[] allReduce(Reduction reduction, INDArray... value) {
        return allReduceAsync(reduction, value).join();
    }

    /**
     * Element-wise sum over all members, as {@link #allReduceAsync(Reduction, INDArray...)}. When the array's
     * length is a multiple of P, the reduce-scatter and all-gather run in slices of at most 8 MiB, each added to
     * and forwarded as it arrives, with every block received straight into the result (the reduce-scatter's
     * partial sums too, in the blocks the all-gather fills later: no scratch).
     *
     * @return the sum, a new array of {@code array}'s shape
     */
    public CollectiveHandle<INDArray> allReduceAsync(INDArray array) {
        return allReduceAsync(array, RingSlices.SLICE_BYTES);
    }

    /** As {@link #allReduceAsync(INDArray)} with slices of at most {@code sliceBytes} (tests). */
    CollectiveHandle<INDArray> allReduceAsync(INDArray array, long sliceBytes) {
        checkArray("allReduce", array);
        int p = group.size();
        if (p == 1 || array.length() == 0 || array.length() % p != 0) {
            CollectiveHandle<INDArray[]> h = allReduceAsync(Reduction.sum(), array);
            return new CollectiveHandle<>(h.description(), h.future().thenApply(t -> t[0]), h::bytesSent);
        }
        INDArray out = Nd4j.createUninitialized(array.dataType(), array.shape(), 'c');
        return start("allReduce(sum)", ex -> RingSlices.allReduce(ex, array, out, sliceBytes));
    }

    /** Blocking element-wise sum over all members. */
    public INDArray allReduce(INDArray array) {
        return allReduceAsync(array).join();
    }

    // ---- broadcast, barrier ---------------------------------------------------------------------------------

    /**
     * Broadcast from member {@code root} ({@code BinomialBroadcast}). Volume: {@code (P - 1) b} over all members,
     * at most {@code ceil(log2 P) b} from one.
     *
     * @param array the array on the root; ignored (may be null) elsewhere
     * @return {@code array} on the root, a new array elsewhere
     */
    public CollectiveHandle<INDArray> broadcastAsync(int root, INDArray array) {
        group.checkIndex(root, "broadcast root");
        if (group.index() == root) {
            checkArray("broadcast", array);
        }
        return start("broadcast(root " + root + ")", ex -> BinomialBroadcast.run(ex, root, array, 0));
    }

    /** Blocking {@link #broadcastAsync}. */
    public INDArray broadcast(int root, INDArray array) {
        return broadcastAsync(root, array).join();
    }

    /** Completes once every member has started this barrier ({@code DisseminationBarrier}). No payload. */
    public CollectiveHandle<Void> barrierAsync() {
        return start("barrier", ex -> DisseminationBarrier.run(ex, 0));
    }

    /** Blocks until every member has reached this barrier. */
    public void barrier() {
        barrierAsync().join();
    }

    // ---- plumbing -------------------------------------------------------------------------------------------

    private <T> CollectiveHandle<T> start(String name, Function<Exchange<T>, CompletableFuture<T>> schedule) {
        Throwable failed = failure;
        if (failed instanceof PeerFailedException notice) {
            // Another member reported a dead rank before this call began: the call fails as a call in flight
            // would, naming that rank, and sends nothing.
            long next;
            synchronized (this) {
                next = calls;                                 // the call this would have been, as members count
            }
            String description = name + " call " + next + " (channel " + channel + ") on " + group;
            return new CollectiveHandle<>(description, CompletableFuture.failedFuture(
                    new CollectiveException(description + ": " + notice.getMessage(), notice)), () -> 0L);
        }
        if (failed != null) {
            throw new IllegalStateException("Communicator on " + group + " (channel " + channel + ") has failed, "
                    + "so the members may be out of step; no further calls. The failure: " + failed.getMessage(),
                    failed);
        }
        long call;
        synchronized (this) {
            if (inFlight.get() >= CollectiveTags.WINDOW) {
                throw new IllegalStateException("Communicator on " + group + " (channel " + channel + "): "
                        + CollectiveTags.WINDOW + " calls in flight, the most its tags allow; join some first");
            }
            inFlight.incrementAndGet();
            call = calls++;
        }
        String description = name + " call " + call + " (channel " + channel + ") on " + group;
        Exchange<T> ex = new Exchange<>(transport, group, channel, call, executor, bytesSent,
                cause -> notices.tell(cause, this, description), description, scratch);
        live.add(ex);
        if (failure instanceof PeerFailedException notice) {
            ex.failQuietly(notice);                      // a notice that came in while this call was starting
        }
        CompletableFuture<T> result;
        try {
            result = ex.finish(schedule.apply(ex));
        } catch (RuntimeException e) {
            ex.fail(e);
            result = ex.result();
        }
        // The caller sees the call done only once this communicator has recorded it: a later call made as soon
        // as this one failed is refused, never started.
        CompletableFuture<T> done = new CompletableFuture<>();
        result.whenComplete((v, e) -> {
            live.remove(ex);
            inFlight.decrementAndGet();
            if (e != null && failure == null) {
                failure = e;
            }
            if (e != null) {
                done.completeExceptionally(e);
            } else {
                done.complete(v);
            }
        });
        return new CollectiveHandle<>(ex.description(), done, ex.bytesSent()::sum);
    }

    /**
     * Another rank reported a failed rank, or another communicator of this rank found one: fail every call in
     * flight, and refuse later ones.
     */
    void failedElsewhere(PeerFailedException notice) {
        if (failure == null) {
            failure = notice;
        }
        failCalls(notice);
    }

    /** Fails every call in flight with {@code notice}, without telling anyone. */
    void failCalls(PeerFailedException notice) {
        for (Exchange<?> ex : live) {
            ex.failQuietly(notice);
        }
    }

    private void checkArray(String op, INDArray a) {
        if (a == null) {
            throw new IllegalArgumentException("Communicator." + op + " on " + group + ": array is null");
        }
    }

    /** Daemon threads, so a forgotten communicator never keeps a worker alive. */
    private static final class DaemonThreads implements java.util.concurrent.ThreadFactory {
        private final AtomicInteger count = new AtomicInteger();

        @Override
        public Thread newThread(Runnable r) {
            Thread t = new Thread(r, "attn4j-collective-" + count.incrementAndGet());
            t.setDaemon(true);
            return t;
        }
    }
}
