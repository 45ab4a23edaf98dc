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
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Implementation of {@link FlashAttentionLayer}: hand-written forward and backward around
 * {@link FlashAttention} (not a SameDiffLayer, whose gradients are doubled in DL4J 1.0.0-M2.1).
 *
 * <p>Inside, activations are handled as rows {@code [B*N, features]} (row {@code b*N + t}) and heads as
 * {@code [B, H, N, hs]}, C order. A training forward keeps q, k, v, o, lse and the projections'
 * inputs outside any workspace, so that {@link #backpropGradient} need not recompute attention.
 */
public class FlashAttentionLayerImpl
        extends AttentionLayerBaseImpl<FlashAttentionLayer, FlashAttentionLayerImpl.Saved> {

    private final FlashAttention attention = FlashAttention.defaults();

    /** What backprop needs from the training forward: the input and mask it saw (by identity), the rest detached. */
    record Saved(INDArray inputRef, INDArray maskRef, AttentionMask mask, INDArray rowMask, INDArray x,
                 INDArray q, INDArray k, INDArray v, INDArray o, INDArray lse, ShardedPass<?> sharded,
                 INDArray merged, INDArray z) implements SavedForward {
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
        AttentionGradients g = f.sharded() != null
                ? f.sharded().backward(f.q(), f.k(), f.v(), dO, c.effectiveScale())
                : attention.backward(f.q(), f.k(), f.v(), f.o(), f.lse(), dO, f.mask(), c.effectiveScale());
        return backpropInputProjections(f.x(), AttentionRows.fromHeads(g.dq()), AttentionRows.fromHeads(g.dk()),
                AttentionRows.fromHeads(g.dv()), workspaceMgr);
    }

    /** Projections, attention and output projection (before the activation), as rows. */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        FlashAttentionLayer c = layerConf();
        checkInput();
        long b = input.size(0);
        long n = timeSteps();
        INDArray maskCopy = maskArray == null ? null : maskArray.castTo(dataType).dup('c');
        AttentionMask mask = attentionMask(c, maskCopy);

        INDArray x = toRows(input, c.getNIn());
        INDArray q = AttentionRows.toHeads(project(x, WQ, BQ, training, workspaceMgr), b, n, c.getNHeads());
        INDArray k = AttentionRows.toHeads(project(x, WK, BK, training, workspaceMgr), b, n, c.getNKvHeads());
        INDArray v = AttentionRows.toHeads(project(x, WV, BV, training, workspaceMgr), b, n, c.getNKvHeads());
        SequenceParallel.Context sp = SequenceParallel.current();
        ShardedPass<?> sharded = null;
        AttentionOutput a;
        if (sp != null) {       // this worker's shard of every sequence: attention with the other workers
            SequenceParallel.checkShard(sp, c.layerType() + " " + layerId(), n, maskArray != null);
            sharded = ShardedPass.forward(sp.softmax(c.isCausal(), c.getSlidingWindow()), q, k, v,
                    c.effectiveScale());
            a = new AttentionOutput(sharded.output(), sharded.lse());
        } else {
            a = attention.forward(q, k, v, mask, c.effectiveScale());
        }
        INDArray merged = AttentionRows.fromHeads(a.output());
        INDArray z = project(merged, WO, BO, training, workspaceMgr);
        INDArray rowMask = maskCopy == null ? null : maskCopy.reshape('c', b * n, 1);
        return new Saved(input, maskArray, mask, rowMask, x, q, k, v, a.output(), a.lse(), sharded, merged, z);
    }

    private static AttentionMask attentionMask(FlashAttentionLayer c, INDArray keyPadding) {
        if (!c.isCausal() && c.getSlidingWindow() == 0 && keyPadding == null) {
            return AttentionMask.none();
        }
        return AttentionMask.builder().causal(c.isCausal()).window(c.getSlidingWindow()).keyPadding(keyPadding)
                .build();
    }
}
