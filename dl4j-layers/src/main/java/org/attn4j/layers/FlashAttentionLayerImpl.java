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
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

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

    /** Keys of {@link #stepState}: the cached keys and values, the position of the first cached one, the next. */
    private static final String K = "k";
    private static final String V = "v";
    private static final String FIRST = "first";
    private static final String NEXT = "next";

    /**
     * One {@code rnnTimeStep}: the new steps' queries attend to the cached keys and values of the steps seen so far
     * and to their own (causal, by global position; a sliding window of W keeps only the last W keys), with the flash
     * kernel. The cache holds K and V as the layer computes them, {@code [B, Hkv, steps, D]}: GQA-sized.
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
        int first = keptInt(FIRST, 0);
        int next = keptInt(NEXT, 0);
        INDArray keys = cachedK == null ? k : Nd4j.concat(2, cachedK, k);
        INDArray values = cachedK == null ? v : Nd4j.concat(2, stepState.get(V), v);
        int n = (int) q.size(2);
        int[] qPos = new int[n];
        int[] kPos = new int[(int) keys.size(2)];
        for (int t = 0; t < n; t++) {
            qPos[t] = next + t;
        }
        for (int j = 0; j < kPos.length; j++) {
            kPos[j] = first + j;
        }
        AttentionMask mask = AttentionMask.builder().causal(true).window(c.getSlidingWindow()).queryPositions(qPos)
                .keyPositions(kPos).build();
        AttentionPass<?> a = AttentionPass.forward(new LocalAttention(FlashAttention.defaults(), mask), q, keys,
                values, c.effectiveScale());
        int keep = c.getSlidingWindow() > 0 ? Math.min(kPos.length, c.getSlidingWindow()) : kPos.length;
        int drop = kPos.length - keep;
        keep(K, keys.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(drop, kPos.length),
                NDArrayIndex.all()));
        keep(V, values.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(drop, kPos.length),
                NDArrayIndex.all()));
        keep(FIRST, first + drop);
        keep(NEXT, next + n);
        return a;
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
