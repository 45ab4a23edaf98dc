package org.attn4j.distributed.training;

import java.util.Arrays;
import java.util.List;
import java.util.function.UnaryOperator;
import java.util.stream.IntStream;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.collective.Reduction;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.layers.KeyValueCaches;
import org.attn4j.layers.SequenceParallel;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.INDArrayIndex;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.SpecifiedIndex;

/**
 * Generation with a prompt too long for one worker: the prompt's forward pass runs sharded over a sequence group
 * with the strategy's softmax algorithm (ring, ATTENTION2D, ...), after which each worker holds the keys and values
 * of its shard in the attention layers' caches; decoding then runs every new step on every worker, each attends
 * it to its own share of the cache, and the group merges the partial results (output and log-sum-exp,
 * BurstAttention section 3.1), so that every worker gets the same output. New steps' keys go to the workers in
 * turn (position {@code p} to member {@code p mod S}), which keeps the shares even.
 * <pre>{@code
 * DistributedDecoder decoder = DistributedDecoder.of(net, transport, ParallelStrategy.sequence("ring", 4));
 * INDArray next = decoder.prefill(prompt);            // the same [B, 1, N] prompt on every worker
 * INDArray after = decoder.step(token);               // the same [B, 1, 1] step on every worker
 * }</pre>
 * The network is a MultiLayerNetwork or a one-input, one-output ComputationGraph whose outputs hold time last
 * ({@code [B, features, T]}) and whose attention layers are causal {@link org.attn4j.layers.FlashAttentionLayer}s
 * (linear attention decodes on one device). The cost of a step: one query per layer against N/S cached keys, and
 * one all-reduce of {@code B x H x (D + 1)} values per layer.
 */
public final class DistributedDecoder {

    private final Model net;
    private final Transport transport;
    private final ParallelStrategy strategy;
    private final int[] members;
    private final int member;
    private final Communicator group;
    private int next;
    /** The prompt's length while {@link #prefill} runs (its parts read it as RoPE's length), else 0. */
    private int prefilling;

    private DistributedDecoder(Model net, Transport transport, ParallelStrategy strategy) {
        if (!(net instanceof MultiLayerNetwork) && !(net instanceof ComputationGraph cg
                && cg.getNumInputArrays() == 1 && cg.getNumOutputArrays() == 1)) {
            throw new IllegalArgumentException("DistributedDecoder: expected a MultiLayerNetwork or a ComputationGraph "
                    + "with one input and one output, got " + (net == null ? "null" : net.getClass().getSimpleName()));
        }
        if (transport.worldSize() != strategy.worldSize()) {
            throw new IllegalArgumentException("DistributedDecoder: the strategy " + strategy + " needs "
                    + strategy.worldSize() + " workers, the transport has " + transport.worldSize());
        }
        if (!strategy.algorithm().softmax()) {
            throw new IllegalArgumentException("DistributedDecoder: decoding needs a softmax algorithm ("
                    + org.attn4j.distributed.sequence.SequenceAlgorithm.names(true) + "), got "
                    + strategy.algorithm().name());
        }
        this.net = net;
        this.transport = transport;
        this.strategy = strategy;
        int s = strategy.sequenceParallel();
        int first = transport.rank() / s * s;
        this.members = IntStream.range(first, first + s).toArray();
        this.member = transport.rank() - first;
        this.group = Communicator.of(transport, Group.of(transport, members), Channels.DECODING.get(0));
    }

    /**
     * A decoder of {@code net} as this worker of {@code transport}'s job: the sequence group of S =
     * {@code strategy.sequenceParallel()} consecutive ranks it belongs to decodes one batch of sequences together.
     *
     * @throws IllegalArgumentException for another kind of network, a transport of another size, or a linear
     *                                  attention algorithm
     */
    public static DistributedDecoder of(Model net, Transport transport, ParallelStrategy strategy) {
        return new DistributedDecoder(net, transport, strategy);
    }

    /**
     * Starts new sequences with their prompts: clears the network's state and runs the prompt sharded over the
     * group (the longest prefix that splits evenly over the layout; the few steps left run as a decoding step).
     * Every worker of the group passes the same prompt.
     *
     * @param prompt the network's input {@code [B, features, N]}
     * @return the network's output at the prompt's last step {@code [B, outputs, 1]}, the same on every worker
     */
    public INDArray prefill(INDArray prompt) {
        return prefill(prompt, 0);
    }

    /**
     * {@link #prefill(INDArray)}, with room in every worker's caches for its share of {@code newSteps} decoding
     * steps after the prompt, allocated once (without it, a cache doubles when full).
     *
     * @param newSteps steps {@link #step} will add, at least 0
     */
    public INDArray prefill(INDArray prompt, int newSteps) {
        if (newSteps < 0) {
            throw new IllegalArgumentException("DistributedDecoder.prefill: newSteps must be >= 0, got " + newSteps);
        }
        if (prompt == null || prompt.rank() != 3 || prompt.size(2) < 1) {
            throw new IllegalArgumentException("DistributedDecoder.prefill: expected a prompt [B, features, N] with "
                    + "N >= 1, got " + (prompt == null ? "null" : Arrays.toString(prompt.shape())));
        }
        clear();
        int n = Math.toIntExact(prompt.size(2));
        SequenceLayout layout = strategy.effectiveLayout(true);
        int parts = layout == SequenceLayout.ZIGZAG ? 2 * members.length : members.length;
        int sharded = n / parts * parts;
        int s = members.length;
        reserve(sharded / s + (n - sharded + newSteps + s - 1) / s);
        INDArray last = null;
        if (sharded > 0) {
            SequenceShardContext context = new SequenceShardContext(transport, members, strategy, true, sharded,
                    p -> () -> { }).withRotaryLength(n);
            int[] positions = context.positions();
            INDArray out;
            try (SequenceParallel.Scope scope = SequenceParallel.enter(context)) {
                out = timeStep(steps(prompt, positions));
            }
            int owner = -1;
            int at = -1;
            for (int m = 0; m < members.length && owner < 0; m++) {
                int[] held = layout.positions(m, members.length, sharded);
                for (int t = 0; t < held.length; t++) {
                    if (held[t] == sharded - 1) {
                        owner = m;
                        at = t;
                    }
                }
            }
            INDArray mine = owner == member ? steps(out, new int[] {at}) : null;
            last = group.broadcast(owner, mine);
            next = sharded;
        }
        if (sharded < n) {
            prefilling = n;
            try {
                INDArray rest = step(prompt.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(sharded,
                        n)));
                last = steps(rest, new int[] {(int) rest.size(2) - 1});
            } finally {
                prefilling = 0;
            }
        }
        return last;
    }

    /**
     * The network's output at every step of {@code input}, computed sharded over the group with the strategy's
     * algorithm (each worker runs its share of the steps, in the strategy's layout) and gathered: the same
     * {@code [B, outputs, N]} on every worker. The caches are neither used nor changed. Every worker passes the same
     * input.
     *
     * @param input the network's input {@code [B, features, N]}; N a multiple of the layout's parts (S, or 2S for
     *              zigzag)
     */
    public INDArray forward(INDArray input) {
        return forward(input, x -> net instanceof MultiLayerNetwork mln ? mln.output(x, false)
                : ((ComputationGraph) net).output(false, x)[0]);
    }

    /**
     * {@link #forward(INDArray)} with a forward pass of the caller's: {@code pass} maps a worker's share of the
     * input {@code [B, features, n]} to its result {@code [B, outputs, n]} (for example a model's logits before its
     * softmax), and runs while the layers shard their attention over the group.
     */
    public INDArray forward(INDArray input, UnaryOperator<INDArray> pass) {
        if (input == null || input.rank() != 3 || input.size(2) < 1) {
            throw new IllegalArgumentException("DistributedDecoder.forward: expected an input [B, features, N] with "
                    + "N >= 1, got " + (input == null ? "null" : Arrays.toString(input.shape())));
        }
        int n = Math.toIntExact(input.size(2));
        SequenceLayout layout = strategy.effectiveLayout(true);
        int parts = layout == SequenceLayout.ZIGZAG ? 2 * members.length : members.length;
        if (n % parts != 0) {
            throw new IllegalArgumentException("DistributedDecoder.forward: N = " + n + " must be a multiple of "
                    + parts + " (the " + layout.name().toLowerCase(java.util.Locale.ROOT) + " layout over "
                    + members.length + " workers)");
        }
        SequenceShardContext context = new SequenceShardContext(transport, members, strategy, true, n,
                p -> () -> { });
        int[] positions = context.positions();
        INDArray mine;
        try (SequenceParallel.Scope scope = SequenceParallel.enter(context)) {
            mine = pass.apply(steps(input, positions));
        }
        if (mine.rank() != 3 || mine.size(2) != positions.length) {
            throw new IllegalStateException("DistributedDecoder.forward: expected " + positions.length
                    + " steps [B, outputs, n] from the pass, got " + Arrays.toString(mine.shape()));
        }
        List<INDArray> shares = members.length == 1 ? List.of(mine) : group.allGather(mine.dup('c'));
        INDArray whole = Nd4j.create(mine.dataType(), mine.size(0), mine.size(1), n);
        for (int m = 0; m < members.length; m++) {
            whole.put(new INDArrayIndex[] {NDArrayIndex.all(), NDArrayIndex.all(), new SpecifiedIndex(Arrays.stream(
                    layout.positions(m, members.length, n)).asLongStream().toArray())}, shares.get(m));
        }
        return whole;
    }

    /**
     * The next steps of every sequence: run on every worker of the group, each attending them to its share of the
     * cache, the partial results merged over the group. Every worker passes the same steps.
     *
     * @param steps the network's input {@code [B, features, n]}
     * @return the network's output at these steps {@code [B, outputs, n]}, the same on every worker
     */
    public INDArray step(INDArray steps) {
        if (steps == null || steps.rank() != 3 || steps.size(2) < 1) {
            throw new IllegalArgumentException("DistributedDecoder.step: expected steps [B, features, n] with n >= 1, "
                    + "got " + (steps == null ? "null" : Arrays.toString(steps.shape())));
        }
        int n = Math.toIntExact(steps.size(2));
        int[] positions = IntStream.range(next, next + n).toArray();
        INDArray out;
        try (SequenceParallel.Scope s = SequenceParallel.enter(new Decoding(positions))) {
            out = timeStep(steps.dup('c'));
        }
        next += n;
        return out;
    }

    /** Steps seen since the last {@link #prefill}. */
    public int length() {
        return next;
    }

    /** Forgets the sequences: the network's caches are emptied. */
    public void clear() {
        if (net instanceof MultiLayerNetwork mln) {
            mln.rnnClearPreviousState();
        } else {
            ((ComputationGraph) net).rnnClearPreviousState();
        }
        next = 0;
    }

    private void reserve(int steps) {
        if (net instanceof MultiLayerNetwork mln) {
            KeyValueCaches.reserve(mln, steps);
        } else {
            KeyValueCaches.reserve((ComputationGraph) net, steps);
        }
    }

    private INDArray timeStep(INDArray input) {
        INDArray out = net instanceof MultiLayerNetwork mln ? mln.rnnTimeStep(input)
                : ((ComputationGraph) net).rnnTimeStep(input)[0];
        if (out.rank() != 3) {
            throw new IllegalStateException("DistributedDecoder: expected the network's output [B, outputs, T], got "
                    + Arrays.toString(out.shape()));
        }
        return out;
    }

    /** The time steps (last dimension) at {@code index}, copied. */
    private static INDArray steps(INDArray a, int[] index) {
        INDArrayIndex[] idx = {NDArrayIndex.all(), NDArrayIndex.all(),
            new SpecifiedIndex(Arrays.stream(index).asLongStream().toArray())};
        return a.get(idx).dup('c');
    }

    /** The context of a decoding step: its positions, the turn of each new key, the group's merge. */
    private final class Decoding implements SequenceParallel.Context, SequenceParallel.Decoding {
        private final int[] positions;

        Decoding(int[] positions) {
            this.positions = positions;
        }

        @Override
        public int length() {
            return positions[positions.length - 1] + 1;
        }

        @Override
        public int rotaryLength() {
            return prefilling > 0 ? prefilling : length();
        }

        @Override
        public int[] positions() {
            return positions.clone();
        }

        @Override
        public SequenceParallelAttention<?> softmax(boolean causal, int window) {
            throw new IllegalStateException("DistributedDecoder: while decoding, attention layers merge partial "
                    + "results; they run no sequence-parallel algorithm");
        }

        @Override
        public SequenceParallelLinearAttention<?> linear(LinearAttention op, Decay decay, boolean causal) {
            throw new IllegalStateException("DistributedDecoder: linear attention decodes on one device");
        }

        @Override
        public SequenceParallel.Decoding decoding() {
            return this;
        }

        @Override
        public boolean keeps(int position) {
            return position % members.length == member;
        }

        @Override
        public AttentionOutput merge(AttentionOutput local) {
            if (members.length == 1) {
                return local;
            }
            INDArray[] merged = group.allReduce(Reduction.attentionMerge(), local.output(), local.lse());
            return new AttentionOutput(merged[0], merged[1]);
        }
    }

    @Override
    public String toString() {
        return "DistributedDecoder{" + strategy + ", member " + member + " of " + members.length + ", " + next
                + " steps}";
    }
}
