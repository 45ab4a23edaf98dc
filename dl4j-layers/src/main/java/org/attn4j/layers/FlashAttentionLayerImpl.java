package org.attn4j.layers;

import static org.attn4j.layers.FlashAttentionParamInitializer.BK;
import static org.attn4j.layers.FlashAttentionParamInitializer.BO;
import static org.attn4j.layers.FlashAttentionParamInitializer.BQ;
import static org.attn4j.layers.FlashAttentionParamInitializer.BV;
import static org.attn4j.layers.FlashAttentionParamInitializer.WK;
import static org.attn4j.layers.FlashAttentionParamInitializer.WO;
import static org.attn4j.layers.FlashAttentionParamInitializer.WQ;
import static org.attn4j.layers.FlashAttentionParamInitializer.WV;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.flash.LocalAttention;
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

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
                 INDArray v, AttentionPass<?> attention, INDArray merged, INDArray z) implements SavedForward {
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
        INDArray dO = AttentionRows.toHeads(dMerged, input.size(0), timeSteps(), c.getNHeads());
        AttentionGradients g = f.attention().backward(f.q(), f.k(), f.v(), dO, c.effectiveScale());
        return backpropInputProjections(f.x(), AttentionRows.fromHeads(g.dq()), AttentionRows.fromHeads(g.dk()),
                AttentionRows.fromHeads(g.dv()), workspaceMgr);
    }

    /**
     * Keys of {@link #stepState}: the cache's keys and values {@code [B, Hkv, capacity, D]}, the steps they hold,
     * the position of the first one, the position of the next step.
     */
    private static final String K = "k";
    private static final String V = "v";
    private static final String LENGTH = "length";
    private static final String FIRST = "first";
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

    /** Bytes the key/value cache holds now (its keys' and values' buffers, room to grow included). */
    public long cacheBytes() {
        INDArray k = stepState.get(K);
        return k == null ? 0 : 2 * k.length() * k.dataType().width();
    }

    /**
     * One {@code rnnTimeStep}: the new steps' queries attend to the cached keys and values of the steps seen so far
     * and to their own (causal, by global position; a sliding window of W keeps only the last W keys), with the flash
     * kernel reading the cache in place. The cache holds K and V as the layer computes them, GQA-sized, in buffers
     * with room to grow: a step appends to them (a window's cache moves its last W keys to the front when full).
     *
     * @throws DL4JInvalidInputException for a layer that is not causal, or a batch that changed size
     */
    private AttentionPass<?> cachedStep(INDArray q, INDArray k, INDArray v) {
        FlashAttentionLayer c = layerConf();
        if (!c.isCausal()) {
            throw new DL4JInvalidInputException(c.layerType() + " " + layerId() + ": rnnTimeStep needs a causal "
                    + "layer (a query of a non-causal one sees later steps, which are not there yet)");
        }
        if (maskArray != null) {
            throw new DL4JInvalidInputException(c.layerType() + " " + layerId() + ": rnnTimeStep takes no per-step "
                    + "mask; step each sequence on its own or without padding");
        }
        INDArray cachedK = stepState.get(K);
        if (cachedK != null && cachedK.size(0) != q.size(0)) {
            throw new DL4JInvalidInputException(c.layerType() + " " + layerId() + ": rnnTimeStep continues "
                    + cachedK.size(0) + " sequences, got a batch of " + q.size(0)
                    + "; call rnnClearPreviousState() to start new ones");
        }
        int n = (int) q.size(2);
        int length = keptInt(LENGTH, 0);
        if (cachedK == null || length + n > cachedK.size(2)) {
            length = makeRoom(k, length, n);
        }
        int first = keptInt(FIRST, 0);
        int next = keptInt(NEXT, 0);
        INDArray keys = stepState.get(K);
        INDArray values = stepState.get(V);
        steps(keys, length, n).assign(k);
        steps(values, length, n).assign(v);
        length += n;
        int[] qPos = new int[n];
        int[] kPos = new int[length];
        for (int t = 0; t < n; t++) {
            qPos[t] = next + t;
        }
        for (int j = 0; j < length; j++) {
            kPos[j] = first + j;
        }
        AttentionMask mask = AttentionMask.builder().causal(true).window(c.getSlidingWindow()).queryPositions(qPos)
                .keyPositions(kPos).build();
        AttentionPass<?> a = AttentionPass.forward(new LocalAttention(FlashAttention.defaults(), mask), q,
                steps(keys, 0, length), steps(values, 0, length), c.effectiveScale());
        keep(LENGTH, length);
        keep(NEXT, next + n);
        return a;
    }

    /**
     * Room for {@code n} more steps after the {@code length} cached ones: a window's cache first drops the keys no
     * later query sees (all but its last W), then the cache moves to a larger buffer if it must (the reserved size,
     * else twice what it needs). Returns the steps the cache holds now.
     */
    private int makeRoom(INDArray k, int length, int n) {
        int window = layerConf().getSlidingWindow();
        int drop = window > 0 ? Math.max(0, length - window) : 0;
        int kept = length - drop;
        INDArray oldK = stepState.get(K);
        INDArray oldV = stepState.get(V);
        long capacity = oldK == null ? 0 : oldK.size(2);
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            INDArray keys = oldK;
            INDArray values = oldV;
            if (kept + n > capacity) {
                long grown = reserved >= kept + n ? reserved
                        : window > 0 ? Math.max(kept + n, 2L * window + n) : Math.max(LEAST_CAPACITY, 2L * (kept + n));
                keys = Nd4j.createUninitialized(k.dataType(), k.size(0), k.size(1), grown, k.size(3));
                values = Nd4j.createUninitialized(k.dataType(), k.size(0), k.size(1), grown, k.size(3));
                reserved = 0;
            }
            if (kept > 0 && (drop > 0 || keys != oldK)) {
                // Through a copy: with a drop into the same buffer, the two ranges may overlap.
                steps(keys, 0, kept).assign(steps(oldK, drop, kept).dup());
                steps(values, 0, kept).assign(steps(oldV, drop, kept).dup());
            }
            stepState.put(K, keys);
            stepState.put(V, values);
        }
        keep(LENGTH, kept);
        keep(FIRST, keptInt(FIRST, 0) + drop);
        return kept;
    }

    /** Steps {@code [from, from + n)} of a cache buffer {@code [B, Hkv, capacity, D]}: a view, built directly. */
    private static INDArray steps(INDArray buffer, long from, long n) {
        long[] stride = buffer.stride();
        return Nd4j.create(buffer.data(), new long[] {buffer.size(0), buffer.size(1), n, buffer.size(3)}, stride,
                from * stride[2], 'c', buffer.dataType());
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
        INDArray q = AttentionRows.toHeads(project(x, WQ, BQ, training, workspaceMgr), b, n, c.getNHeads());
        INDArray k = AttentionRows.toHeads(project(x, WK, BK, training, workspaceMgr), b, n, c.getNKvHeads());
        INDArray v = AttentionRows.toHeads(project(x, WV, BV, training, workspaceMgr), b, n, c.getNKvHeads());
        AttentionPass<?> a = stepping() ? cachedStep(q, k, v)
                : AttentionPass.forward(SequenceParallel.softmax(c.layerType() + " " + layerId(), b, n,
                        c.isCausal(), c.getSlidingWindow(), maskCopy), q, k, v, c.effectiveScale());
        INDArray merged = AttentionRows.fromHeads(a.output());
        INDArray z = project(merged, WO, BO, training, workspaceMgr);
        INDArray rowMask = maskCopy == null ? null : maskCopy.reshape('c', b * n, 1);
        return new Saved(input, maskArray, rowMask, x, q, k, v, a, merged, z);
    }
}
