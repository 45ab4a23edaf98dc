package org.attn4j.distributed.sequence;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * LASP, linear attention sequence parallelism (Sun et al., LASP, section 2, algorithms 2 and 3), on the
 * contiguous layout: member {@code i} of the group holds positions {@code [i N/P, (i+1) N/P)}.
 * <pre>
 *   causal forward:   kv_(i-1) from member i-1  ->  local chunked forward with it as kvIn  ->  kvOut to i+1
 *   causal backward:  dKV from member i+1 (the gradient of kvOut)  ->  local backward  ->  dKvIn to i-1
 *   non-causal:       S = allReduce(K_i^T V_i); O_i = Q_i S; G = allReduce(Q_i^T dO_i); dK_i = V_i G^T, ...
 * </pre>
 * Only the {@code D x D} states travel (one per query head), whatever N is; the per-chunk states of the local
 * forward pass are kept for the backward pass (KV state caching, section 2.3). This is the sequential form of
 * algorithm 2; the data-sequence hybrid (T dividing W) comes from giving each sequence group its own
 * communicator.
 *
 * <p>Not thread-safe; one instance per worker; every member makes the same calls in the same order.
 */
public final class LaspAttention implements SequenceParallelLinearAttention<LaspAttention.Forward> {

    private final Communicator comm;
    private final Decay decay;
    private final boolean causal;
    private final LinearAttention op;
    private final Documents documents;

    /**
     * @param comm   the sequence-parallel group, in sequence order
     * @param decay  the decay rates (must be {@link Decay#none()} when not causal)
     * @param causal causal linear attention (the chain) or the non-causal right product (an all-reduce)
     */
    public LaspAttention(Communicator comm, Decay decay, boolean causal) {
        this(comm, decay, causal, LinearAttention.defaults());
    }

    /**
     * @param comm   the sequence-parallel group, in sequence order
     * @param decay  the decay rates (must be {@link Decay#none()} when not causal)
     * @param causal causal linear attention (the chain) or the non-causal right product (an all-reduce)
     * @param op     the local op (its chunk size; {@link LinearAttention#withDecayGradient()} for a learned decay)
     */
    public LaspAttention(Communicator comm, Decay decay, boolean causal, LinearAttention op) {
        this(comm, decay, causal, op, null);
    }

    private LaspAttention(Communicator comm, Decay decay, boolean causal, LinearAttention op, Documents documents) {
        this.comm = comm;
        this.decay = decay;
        this.causal = causal;
        this.op = op;
        this.documents = documents;
    }

    /**
     * The state restarts at every document: each member runs its shard as positions {@code i N/P ...} of the
     * packed sequences, so the state handed on along the chain joins the next shard only where its first document
     * continues. Non-causal, each document's sum covers its own positions: only documents that straddle a shard
     * boundary are summed over the members ({@link LaspDocuments}).
     */
    @Override
    public LaspAttention withDocuments(Documents documents) {
        return new LaspAttention(comm, decay, causal, op, documents);
    }

    /**
     * LASP's data-sequence hybrid (section 2.5): the {@code W} workers form {@code W/T} sequence groups of
     * {@code T} consecutive ranks; group {@code j = rank / T} runs LASP over its own batch slice while the
     * other groups run theirs (the data-parallel index). {@code T = W} is plain LASP; {@code T = 1} is pure data
     * parallelism with no attention traffic.
     *
     * @param transport            all W workers
     * @param sequenceParallelSize T, which must divide W
     * @throws IllegalArgumentException if T does not divide W, before any communication
     */
    public static LaspAttention hybrid(Transport transport, int sequenceParallelSize, Decay decay, boolean causal) {
        int w = transport.worldSize();
        if (sequenceParallelSize < 1 || w % sequenceParallelSize != 0) {
            throw new IllegalArgumentException("LaspAttention: sequence-parallel size T = " + sequenceParallelSize
                    + " with world size W = " + w + "; T must divide W (W/T data-parallel groups of T ranks)");
        }
        int first = transport.rank() / sequenceParallelSize * sequenceParallelSize;
        int[] ranks = new int[sequenceParallelSize];
        for (int i = 0; i < ranks.length; i++) {
            ranks[i] = first + i;
        }
        return new LaspAttention(Communicator.of(transport, Group.of(transport, ranks), Channels.SEQUENCE.get(0)), decay,
                causal);
    }

    /** This worker's output and the cache its backward pass needs. */
    public record Forward(LinearAttentionOutput local, INDArray kvIn) implements SequenceParallelAttention.Pass {
        /** The local output {@code [B, H, N/P, D]}. */
        @Override
        public INDArray output() {
            return local.output();
        }

        /** Linear attention has no softmax: null. */
        @Override
        public INDArray lse() {
            return null;
        }
    }

    /**
     * The forward pass on this worker's contiguous shard.
     *
     * @return the local output and what the backward pass needs
     */
    @Override
    public Forward forward(INDArray q, INDArray k, INDArray v) {
        int p = comm.group().size();
        int me = comm.group().index();
        // This member's positions must be the same in q, k and v: refused here, before anything is sent.
        if (q != null && k != null && v != null && q.rank() == 4 && k.rank() == 4 && v.rank() == 4
                && (k.size(2) != q.size(2) || v.size(2) != q.size(2))) {
            throw new IllegalArgumentException("LaspAttention: q, k and v must hold the same " + q.size(2)
                    + " positions of this member's shard, got k " + k.size(2) + " and v " + v.size(2));
        }
        if (documents != null && q != null && q.rank() == 4) {
            documents.requireSize("LaspAttention", q.size(0), q.size(2) * p);
        }
        int first = documents == null || q == null || q.rank() != 4 ? 0 : Math.toIntExact(me * q.size(2));
        if (!causal && documents != null) {
            return new Forward(new LaspDocuments(comm, documents).forward(q, k, v), null);
        }
        if (!causal) {
            LinearAttentionOutput local = op.forward(q, k, v, decay, false, null);
            INDArray total = p == 1 ? local.kvOut() : comm.allReduce(local.kvOut());
            INDArray kvIn = total.sub(local.kvOut());                  // the other members' K^T V
            return new Forward(op.forward(q, k, v, decay, false, kvIn), kvIn);
        }
        // The chain as P - 1 steps that every member takes part in (communicator calls match by order): at step
        // j member j hands its final state to member j + 1, which then runs its own chunk.
        INDArray kvIn = null;
        LinearAttentionOutput local = me == 0 ? op.forward(q, k, v, decay, true, null, documents, first) : null;
        for (int j = 0; j < p - 1; j++) {
            if (me == j) {
                comm.sendRecv(comm.group().next(), local.kvOut(), Communicator.NONE);
            } else if (me == j + 1) {
                kvIn = comm.sendRecv(Communicator.NONE, null, comm.group().previous());
                local = op.forward(q, k, v, decay, true, kvIn, documents, first);
            } else {
                comm.sendRecv(Communicator.NONE, null, Communicator.NONE);
            }
        }
        return new Forward(local, kvIn);
    }

    /**
     * The backward pass, given this worker's forward result.
     *
     * @return local dQ, dK, dV (and the state gradient sent back, for inspection)
     */
    @Override
    public LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, Forward fwd, INDArray dO) {
        int p = comm.group().size();
        int me = comm.group().index();
        if (!causal && documents != null) {
            return new LaspDocuments(comm, documents).backward(q, k, v, dO);
        }
        if (!causal) {
            LinearAttentionGradients local = op.backward(q, k, v, decay, false, fwd.kvIn(), dO, null, null);
            INDArray total = p == 1 ? local.dKvIn() : comm.allReduce(local.dKvIn());
            return op.backward(q, k, v, decay, false, fwd.kvIn(), dO, total.sub(local.dKvIn()), null);
        }
        // Backwards along the chain: at step j member j hands the gradient of its incoming state to member j - 1.
        int first = documents == null ? 0 : Math.toIntExact(me * q.size(2));
        LinearAttentionGradients g = me == p - 1
                ? op.backward(q, k, v, decay, true, fwd.kvIn(), dO, null, fwd.local().cache(), documents, first) : null;
        for (int j = p - 1; j > 0; j--) {
            if (me == j) {
                comm.sendRecv(comm.group().previous(), g.dKvIn(), Communicator.NONE);
            } else if (me == j - 1) {
                INDArray dKvOut = comm.sendRecv(Communicator.NONE, null, comm.group().next());
                g = op.backward(q, k, v, decay, true, fwd.kvIn(), dO, dKvOut, fwd.local().cache(), documents, first);
            } else {
                comm.sendRecv(Communicator.NONE, null, Communicator.NONE);
            }
        }
        return g;
    }
}
