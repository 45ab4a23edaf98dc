package org.attn4j.layers;

import static org.attn4j.layers.FlashAttentionParamInitializer.BK;
import static org.attn4j.layers.FlashAttentionParamInitializer.BO;
import static org.attn4j.layers.FlashAttentionParamInitializer.BQ;
import static org.attn4j.layers.FlashAttentionParamInitializer.BV;
import static org.attn4j.layers.FlashAttentionParamInitializer.WK;
import static org.attn4j.layers.FlashAttentionParamInitializer.WO;
import static org.attn4j.layers.FlashAttentionParamInitializer.WQ;
import static org.attn4j.layers.FlashAttentionParamInitializer.WV;

import java.util.Arrays;
import java.util.stream.IntStream;

import org.attn4j.ops.Documents;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.flash.LocalAttention;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.indexing.SpecifiedIndex;

/**
 * Implementation of {@link FlashAttentionLayer}: hand-written forward and backward around the attention of
 * {@link SequenceParallel#softmax} ({@link LocalAttention} on one device, the context's algorithm on a worker's
 * shard), not a SameDiffLayer, whose gradients are doubled in DL4J 1.0.0-M2.1.
 *
 * <p>Inside, activations are handled as rows {@code [B*N, features]} (row {@code b*N + t}) and heads as
 * {@code [B, H, N, hs]}, C order. A training forward keeps q, k, v, o, lse and the projections'
 * inputs outside any workspace, so that {@link #backpropGradient} need not recompute attention.
 */
public class FlashAttentionLayerImpl
        extends AttentionLayerBaseImpl<FlashAttentionLayer, FlashAttentionLayerImpl.Saved> {

    /** What backprop needs from the training forward: the input and mask it saw (by identity), the rest detached. */
    record Saved(INDArray inputRef, INDArray maskRef, INDArray rowMask, INDArray x, INDArray q, INDArray k,
                 INDArray v, RotaryEmbedding.Table rope, AttentionPass<?> attention, INDArray merged, INDArray z)
            implements SavedForward {
        /** The layer's own arrays; not the rotary table (shared) nor what the attention pass holds. */
        @Override
        public void release() {
            for (INDArray a : new INDArray[] {rowMask, x, q, k, v, merged, z}) {
                RowLayerImpl.release(a);
            }
        }
    }

    /**
     * Creates the layer for a configuration whose layer is a {@link FlashAttentionLayer}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    public FlashAttentionLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /** Output projection, attention and input projections, from what the forward kept. */
    @Override
    protected INDArray backpropToInput(Saved f, INDArray dz, LayerWorkspaceMgr workspaceMgr) {
        FlashAttentionLayer c = layerConf();
        INDArray dMerged = backpropProjection(f.merged(), dz, WO, BO, workspaceMgr);
        INDArray dO = heads(dMerged, input.size(0), timeSteps(), c.getNHeads());
        AttentionGradients g = f.attention().backward(f.q(), f.k(), f.v(), dO, c.effectiveScale());
        release(dO);
        INDArray dq = g.dq();
        INDArray dk = g.dk();
        if (f.rope() != null) {                  // q and k were rotated: their gradients turn back
            dq = c.getRope().rotateBack(dq, f.rope());
            dk = c.getRope().rotateBack(dk, f.rope());
        }
        // the gradients the attention pass returned are its own; the copies made here are freed once used
        INDArray[] rows = {AttentionRows.fromHeads(dq), AttentionRows.fromHeads(dk), AttentionRows.fromHeads(g.dv())};
        if (dq != g.dq()) {
            release(dq);
        }
        if (dk != g.dk()) {
            release(dk);
        }
        INDArray dx = backpropInputProjections(f.x(), rows[0], rows[1], rows[2], workspaceMgr);
        for (INDArray r : rows) {
            release(r);
        }
        return dx;
    }

    /**
     * Keys of {@link #stepState}: the cache's keys and values {@code [B, Hkv, capacity, D]} and their global
     * positions {@code [capacity]} (ascending), the steps they hold, the position of the next step (one device).
     */
    private static final String K = "k";
    private static final String V = "v";
    private static final String POSITIONS = "positions";
    private static final String LENGTH = "length";
    private static final String NEXT = "next";
    /** Rows of the smallest cache allocated when nothing was reserved. */
    private static final int LEAST_CAPACITY = 64;

    /** Steps the next cache allocation makes room for (0: twice what it needs). */
    private transient int reserved;

    /**
     * Makes room for {@code steps} steps in the key/value cache the next time it grows (at the start of a sequence,
     * with a prompt), so that a caller that knows how long its sequences get allocates the cache once, and no more
     * than it needs. Without it the cache doubles when full (amortised O(1) copying per step).
     */
    public void reserveCache(int steps) {
        if (steps < 0) {
            throw new IllegalArgumentException(layerConf().layerType() + " " + layerId() + ": reserveCache needs "
                    + "steps >= 0, got " + steps);
        }
        reserved = steps;
    }

    /**
     * Bytes the key/value cache holds now: its keys', values' and positions' buffers, room to grow included
     * ({@link KeyValueCaches#bytesPerStep} per step).
     */
    public long cacheBytes() {
        INDArray k = stepState.get(K);
        return k == null ? 0 : 2 * k.length() * k.dataType().width() + stepState.get(POSITIONS).length() * 4L;
    }

    /**
     * The attention part of one {@code rnnTimeStep} on one device, for a caller that ran the projections and the
     * rotation itself (a decoder's single-token path): appends {@code k} and {@code v} {@code [B, Hkv, n, D]} to the
     * cache as the steps at {@link #nextPosition()} on, and returns the attention of {@code q [B, H, n, D]} over
     * the cache, {@code [B, H, n, D]}. The layer's state then is what {@code rnnTimeStep} would have left, so the
     * two can alternate.
     *
     * @throws DL4JInvalidInputException inside a sequence-parallel group, or as {@code rnnTimeStep} would
     */
    public INDArray attendCached(INDArray q, INDArray k, INDArray v) {
        if (SequenceParallel.current() != null) {
            throw new DL4JInvalidInputException(layerConf().layerType() + " " + layerId() + ": attendCached runs on "
                    + "one device; a sequence-parallel group decodes through rnnTimeStep");
        }
        return cachedStep(q, k, v).output();
    }

    /** The global position of the next step {@code rnnTimeStep} or {@link #attendCached} adds (one device). */
    public int nextPosition() {
        return keptInt(NEXT, 0);
    }

    /**
     * One {@code rnnTimeStep}: the new steps' queries attend to the cached keys and values of the steps seen so far
     * and to their own (causal, by global position; a sliding window of W sees only the last W keys), with the flash
     * kernel reading the cache in place. The cache holds K and V as the layer computes them, GQA-sized, in buffers
     * with room to grow. On a worker of a sequence-parallel group, a prefill runs the group's algorithm on the
     * worker's shard and caches the shard's keys; decoding then keeps each new step's key on one worker
     * ({@link SequenceParallel.Decoding#keeps}) and merges the workers' partial attention.
     *
     * @throws DL4JInvalidInputException for a layer that is not causal, a per-step mask, or a batch that changed
     *                                   size
     */
    private AttentionPass<?> cachedStep(INDArray q, INDArray k, INDArray v) {
        FlashAttentionLayer c = layerConf();
        String name = c.layerType() + " " + layerId();
        if (!c.isCausal()) {
            throw new DL4JInvalidInputException(name + ": rnnTimeStep needs a causal layer (a query of a non-causal "
                    + "one sees later steps, which are not there yet)");
        }
        if (maskArray != null) {
            throw new DL4JInvalidInputException(name + ": rnnTimeStep takes no per-step mask; step each sequence on "
                    + "its own or without padding");
        }
        INDArray cachedK = stepState.get(K);
        if (cachedK != null && cachedK.size(0) != q.size(0)) {
            throw new DL4JInvalidInputException(name + ": rnnTimeStep continues " + cachedK.size(0) + " sequences, got "
                    + "a batch of " + q.size(0) + "; call rnnClearPreviousState() to start new ones");
        }
        int n = (int) q.size(2);
        SequenceParallel.Context group = SequenceParallel.current();
        if (group != null && group.decoding() == null) {            // a sequence-parallel prefill
            if (cachedK != null) {
                throw new DL4JInvalidInputException(name + ": a sequence-parallel prefill starts a sequence; call "
                        + "rnnClearPreviousState() first");
            }
            AttentionPass<?> a = AttentionPass.forward(SequenceParallel.softmax(name, q.size(0), n, true,
                    c.getSlidingWindow(), null), q, k, v, c.effectiveScale());
            append(k, v, group.positions());
            return a;
        }
        int[] qPos = new int[n];
        if (group == null) {
            int next = keptInt(NEXT, 0);
            Arrays.setAll(qPos, t -> next + t);
            append(k, v, qPos);
            keep(NEXT, next + n);
        } else {
            qPos = group.positions();
            appendKept(k, v, qPos, group.decoding());
        }
        int length = keptInt(LENGTH, 0);
        AttentionOutput local;
        if (length == 0) {                                          // a worker that holds no key yet
            local = new AttentionOutput(Nd4j.zeros(q.dataType(), q.shape()),
                    Nd4j.valueArrayOf(new long[] {q.size(0), q.size(1), n}, Double.NEGATIVE_INFINITY, q.dataType()));
        } else {
            AttentionMask.Builder mask = AttentionMask.builder().causal(true).window(c.getSlidingWindow());
            if (group == null) {
                // One device caches consecutive positions (a window drops a prefix): the keys are at first + j, and
                // the mask, which reads only differences of positions, is the same counted from the first key.
                int first = qPos[n - 1] + 1 - length;
                mask.queryPositions(Arrays.stream(qPos).map(p -> p - first).toArray());
            } else {
                mask.queryPositions(qPos).keyPositions(cachedPositions(length));
            }
            local = FlashAttention.defaults().forward(q, steps(stepState.get(K), 0, length),
                    steps(stepState.get(V), 0, length), mask.build(), c.effectiveScale());
        }
        AttentionOutput all = group == null ? local : group.decoding().merge(local);
        return AttentionPass.forward(new Decoded(all), q, k, v, c.effectiveScale());
    }

    /** The steps of {@code k} and {@code v} at positions this worker keeps while decoding, appended to its cache. */
    private void appendKept(INDArray k, INDArray v, int[] positions, SequenceParallel.Decoding decoding) {
        int[] kept = IntStream.range(0, positions.length).filter(t -> decoding.keeps(positions[t])).toArray();
        if (kept.length == positions.length) {
            append(k, v, positions);
        } else if (kept.length > 0) {
            long[] idx = Arrays.stream(kept).asLongStream().toArray();
            append(k.get(NDArrayIndex.all(), NDArrayIndex.all(), new SpecifiedIndex(idx), NDArrayIndex.all()),
                    v.get(NDArrayIndex.all(), NDArrayIndex.all(), new SpecifiedIndex(idx), NDArrayIndex.all()),
                    Arrays.stream(kept).map(t -> positions[t]).toArray());
        } else {
            makeRoom(k, 0, positions.length == 0 ? Integer.MAX_VALUE : positions[0]);   // a window may drop keys
        }
    }

    /** Appends the steps of {@code k} and {@code v} (at ascending global {@code positions}) to the cache. */
    private void append(INDArray k, INDArray v, int[] positions) {
        int n = positions.length;
        int length = makeRoom(k, n, positions[0]);
        steps(stepState.get(K), length, n).assign(k);
        steps(stepState.get(V), length, n).assign(v);
        stepState.get(POSITIONS).get(NDArrayIndex.interval(length, length + n)).assign(Nd4j.createFromArray(positions));
        keep(LENGTH, length + n);
    }

    /** The global positions of the first {@code length} cached steps. */
    private int[] cachedPositions(int length) {
        // One bulk copy of the buffer per step: toIntVector on a view of it took 0.3-0.7 ms at 4096 steps, an
        // element-wise getInt per cached key O(context) calls into ND4J.
        INDArray positions = stepState.get(POSITIONS);
        if (positions.offset() == 0 && positions.data().length() >= length) {
            int[] all = positions.data().asInt();
            return all.length == length ? all : Arrays.copyOf(all, length);
        }
        return positions.get(NDArrayIndex.interval(0, length)).toIntVector();
    }

    /**
     * Room for {@code n} more steps, the first of them at global position {@code from}: when the cache is full, a
     * window's cache first drops the keys no query from {@code from} on sees, then the cache moves to a larger
     * buffer if it must (the reserved size, else twice what it needs; for a window of W at most 2W + n steps, so its
     * memory stays bounded whatever the reservation). Returns the steps the cache holds now.
     */
    private int makeRoom(INDArray k, int n, int from) {
        INDArray oldK = stepState.get(K);
        int length = keptInt(LENGTH, 0);
        long capacity = oldK == null ? 0 : oldK.size(2);
        if (oldK != null && length + n <= capacity) {
            return length;
        }
        int window = layerConf().getSlidingWindow();
        int drop = 0;
        while (window > 0 && drop < length && stepState.get(POSITIONS).getInt(drop) <= (long) from - window) {
            drop++;
        }
        int kept = length - drop;
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            INDArray keys = oldK;
            INDArray values = stepState.get(V);
            INDArray positions = stepState.get(POSITIONS);
            if (kept + n > capacity) {
                long grown = reserved >= kept + n ? reserved : Math.max(LEAST_CAPACITY, 2L * (kept + n));
                if (window > 0) {
                    // A window's cache never needs more than 2W + n rows: it keeps fewer than W once it drops, and
                    // W more steps fill it again before the next drop (amortised O(1) copying per step).
                    grown = Math.max(kept + n, Math.min(grown, 2L * window + n));
                }
                keys = Nd4j.createUninitialized(k.dataType(), k.size(0), k.size(1), grown, k.size(3));
                values = Nd4j.createUninitialized(k.dataType(), k.size(0), k.size(1), grown, k.size(3));
                positions = Nd4j.createUninitialized(DataType.INT, grown);
                reserved = 0;
            }
            if (kept > 0 && (drop > 0 || keys != oldK)) {
                // Through a copy: with a drop into the same buffer, the two ranges may overlap.
                steps(keys, 0, kept).assign(steps(oldK, drop, kept).dup());
                steps(values, 0, kept).assign(steps(stepState.get(V), drop, kept).dup());
                positions.get(NDArrayIndex.interval(0, kept)).assign(
                        stepState.get(POSITIONS).get(NDArrayIndex.interval(drop, length)).dup());
            }
            stepState.put(K, keys);
            stepState.put(V, values);
            stepState.put(POSITIONS, positions);
        }
        keep(LENGTH, kept);
        return kept;
    }

    /** Steps {@code [from, from + n)} of a cache buffer {@code [B, Hkv, capacity, D]}: a view, built directly. */
    private static INDArray steps(INDArray buffer, long from, long n) {
        long[] stride = buffer.stride();
        return Nd4j.create(buffer.data(), new long[] {buffer.size(0), buffer.size(1), n, buffer.size(3)}, stride,
                from * stride[2], 'c', buffer.dataType());
    }

    /** Attention already computed (a decoding step's): inference only. */
    private record Decoded(AttentionOutput result) implements SequenceParallelAttention<AttentionOutput> {
        @Override
        public AttentionOutput forward(INDArray q, INDArray k, INDArray v, double scale) {
            return result;
        }

        @Override
        public AttentionGradients backward(INDArray q, INDArray k, INDArray v, AttentionOutput forward, INDArray dO,
                                           double scale) {
            throw new UnsupportedOperationException("rnnTimeStep is inference: no backward pass");
        }

        @Override
        public SequenceParallelAttention<AttentionOutput> withDocuments(Documents documents) {
            throw new UnsupportedOperationException("rnnTimeStep takes no documents");
        }
    }

    /** Projections, attention and output projection (before the activation), as rows. */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        FlashAttentionLayer c = layerConf();
        checkInput();
        long b = input.size(0);
        long n = timeSteps();
        INDArray maskCopy = maskArray == null ? null : maskArray.castTo(dataType).dup('c');

        INDArray x = toRows(input, c.getNIn());
        INDArray q = heads(project(x, WQ, BQ, training, workspaceMgr), b, n, c.getNHeads());
        INDArray k = heads(project(x, WK, BK, training, workspaceMgr), b, n, c.getNKvHeads());
        INDArray v = heads(project(x, WV, BV, training, workspaceMgr), b, n, c.getNKvHeads());
        RotaryEmbedding.Table rope = ropeTable(c, b, n);
        if (rope != null) {
            q = rotated(c.getRope(), q, rope);
            k = rotated(c.getRope(), k, rope);
        }
        AttentionPass<?> a = stepping() ? cachedStep(q, k, v)
                : AttentionPass.forward(SequenceParallel.softmax(c.layerType() + " " + layerId(), b, n,
                        c.isCausal(), c.getSlidingWindow(), maskCopy), q, k, v, c.effectiveScale());
        INDArray merged = AttentionRows.fromHeads(a.output());
        INDArray z = project(merged, WO, BO, training, workspaceMgr);
        INDArray rowMask = maskCopy == null ? null : maskCopy.reshape('c', b * n, 1);
        return new Saved(input, maskArray, rowMask, x, q, k, v, rope, a, merged, z);
    }

    /** Projected rows as C-order heads; the rows, copied, are freed. */
    private static INDArray heads(INDArray rows, long b, long n, int h) {
        INDArray heads = AttentionRows.toHeads(rows, b, n, h);
        release(rows);
        return heads;
    }

    /** {@code x} rotated; {@code x} is freed if the rotation made a new array. */
    private static INDArray rotated(RotaryEmbedding rope, INDArray x, RotaryEmbedding.Table table) {
        INDArray r = rope.rotate(x, table);
        if (r != x) {
            release(x);
        }
        return r;
    }

    /**
     * RoPE's cos and sin at the global positions of this pass's steps, or null without RoPE: {@code 0 .. N-1} on one
     * device, the shard's positions on a sequence-parallel worker, the steps after the cache in {@code rnnTimeStep},
     * and with packed documents restarting per document, each step's offset in its document. The sequence length
     * that dynamic scaling reads is the global one: N, the steps seen so far while decoding (the whole prompt during
     * a prefill that runs in parts, {@link SequenceParallel.Context#rotaryLength()}), or the longest document when
     * positions restart.
     */
    private RotaryEmbedding.Table ropeTable(FlashAttentionLayer c, long batch, long n) {
        RotaryEmbedding rope = c.getRope();
        if (rope == null) {
            return null;
        }
        String name = c.layerType() + " " + layerId();
        SequenceParallel.Context group = SequenceParallel.current();
        int headSize = c.effectiveHeadSize();
        if (stepping()) {
            if (group != null) {
                return rope.table(headSize, new int[][] {group.positions()}, group.rotaryLength());
            }
            int next = keptInt(NEXT, 0);
            int[] positions = new int[Math.toIntExact(n)];
            Arrays.setAll(positions, t -> next + t);
            return rope.table(headSize, new int[][] {positions}, next + positions.length);
        }
        int[] positions = SequenceParallel.positions(name, n);
        int length = group == null ? Math.toIntExact(n) : group.length();
        Documents documents = PackedSequences.forInput(name, batch, length);
        if (documents == null || !c.isRopeRestartsPerDocument()) {
            return rope.table(headSize, new int[][] {positions}, group == null ? length : group.rotaryLength());
        }
        int[][] own = new int[Math.toIntExact(batch)][positions.length];
        int longest = 1;
        for (int s = 0; s < own.length; s++) {
            for (int t = 0; t < positions.length; t++) {
                own[s][t] = positions[t] - documents.start(s, positions[t]);
            }
            for (int p = 0; p < length; p++) {
                longest = Math.max(longest, documents.end(s, p) - documents.start(s, p));
            }
        }
        return rope.table(headSize, own, longest);
    }
}
