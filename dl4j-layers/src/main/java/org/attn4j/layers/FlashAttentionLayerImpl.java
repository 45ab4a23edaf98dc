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
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.api.MaskState;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.gradient.DefaultGradient;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.layers.BaseLayer;
import org.deeplearning4j.nn.workspace.ArrayType;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.common.primitives.Pair;
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
public class FlashAttentionLayerImpl extends BaseLayer<FlashAttentionLayer> {

    private final FlashAttention attention = FlashAttention.defaults();
    private transient Saved saved;

    /** What backprop needs from the training forward: the input and mask it saw (by identity), the rest detached. */
    private record Saved(INDArray inputRef, INDArray maskRef, AttentionMask mask, INDArray rowMask, INDArray x,
                         INDArray q, INDArray k, INDArray v, INDArray o, INDArray lse, INDArray merged,
                         INDArray z) {
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

    /**
     * Forward pass: input {@code [B, nIn, N]} (NCW) or {@code [B, N, nIn]} (NWC) to output {@code [B, nOut, N]}
     * or {@code [B, N, nOut]}, in the ACTIVATIONS workspace; zero at steps the mask marks as padding.
     *
     * @throws DL4JInvalidInputException if the input or mask shape does not fit the layer
     */
    @Override
    public INDArray activate(boolean training, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(false);
        applyDropOutIfNecessary(training, workspaceMgr);
        Saved f;
        if (training) {
            f = forwardOutsideWorkspaces(workspaceMgr);
            saved = f;
        } else {
            saved = null;
            f = forward(false, workspaceMgr);
        }
        INDArray y = layerConf().getActivationFn().getActivation(f.z().dup(), training);
        if (f.rowMask() != null) {
            y.muliColumnVector(f.rowMask());
        }
        return fromRows(y, workspaceMgr, ArrayType.ACTIVATIONS);
    }

    /**
     * Backward pass for the last training forward: fills this layer's gradient view and returns
     * dL/dInput in the input's layout, in the ACTIVATION_GRAD workspace.
     *
     * @param epsilon dL/dOutput in the output's layout
     */
    @Override
    public Pair<Gradient, INDArray> backpropGradient(INDArray epsilon, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(true);
        Saved f = saved;
        if (f == null || f.inputRef() != input || f.maskRef() != maskArray) {
            f = forwardOutsideWorkspaces(workspaceMgr);
        }
        saved = null;
        FlashAttentionLayer c = layerConf();
        long b = input.size(0);
        long n = timeSteps();

        INDArray eps = toRows(epsilon, c.getNOut());
        if (f.rowMask() != null) {
            eps.muliColumnVector(f.rowMask());
        }
        INDArray dz = c.getActivationFn().backprop(f.z().dup(), eps).getFirst();

        INDArray dMerged = backpropProjection(f.merged(), dz, WO, BO, workspaceMgr);
        INDArray dO = AttentionRows.toHeads(dMerged, b, n, c.getNHeads());
        AttentionGradients g = attention.backward(f.q(), f.k(), f.v(), f.o(), f.lse(), dO, f.mask(),
                c.effectiveScale());

        INDArray dx = backpropProjection(f.x(), AttentionRows.fromHeads(g.dq()), WQ, BQ, workspaceMgr);
        dx.addi(backpropProjection(f.x(), AttentionRows.fromHeads(g.dk()), WK, BK, workspaceMgr));
        dx.addi(backpropProjection(f.x(), AttentionRows.fromHeads(g.dv()), WV, BV, workspaceMgr));

        Gradient gradient = new DefaultGradient(gradientsFlattened);
        for (String key : c.initializer().paramKeys(c)) {
            gradient.gradientForVariable().put(key, gradientViews.get(key));
        }
        weightNoiseParams.clear();

        INDArray epsOut = backpropDropOutIfPresent(fromRows(dx, workspaceMgr, ArrayType.ACTIVATION_GRAD));
        return new Pair<>(gradient, epsOut);
    }

    /** For {@code out = in W + b}: writes dL/dW and dL/db into the gradient views, returns dL/din. */
    private INDArray backpropProjection(INDArray in, INDArray dOut, String wKey, String bKey,
                                        LayerWorkspaceMgr workspaceMgr) {
        return AttentionRows.backpropAffine(in, dOut, getParamWithNoise(wKey, true, workspaceMgr),
                gradientViews.get(wKey), gradientViews.get(bKey));
    }

    /** A training forward whose arrays outlive the workspaces open now, so that backprop can use them. */
    private Saved forwardOutsideWorkspaces(LayerWorkspaceMgr workspaceMgr) {
        return AttentionRows.outsideWorkspaces(() -> forward(true, workspaceMgr));
    }

    /** Projections, attention and output projection (before the activation), as rows. */
    private Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        FlashAttentionLayer c = layerConf();
        checkInput(c);
        long b = input.size(0);
        long n = timeSteps();
        INDArray maskCopy = maskArray == null ? null : maskArray.castTo(dataType).dup('c');
        AttentionMask mask = attentionMask(c, maskCopy);

        INDArray x = toRows(input, c.getNIn());
        INDArray q = AttentionRows.toHeads(project(x, WQ, BQ, training, workspaceMgr), b, n, c.getNHeads());
        INDArray k = AttentionRows.toHeads(project(x, WK, BK, training, workspaceMgr), b, n, c.getNKvHeads());
        INDArray v = AttentionRows.toHeads(project(x, WV, BV, training, workspaceMgr), b, n, c.getNKvHeads());
        AttentionOutput a = attention.forward(q, k, v, mask, c.effectiveScale());
        INDArray merged = AttentionRows.fromHeads(a.output());
        INDArray z = project(merged, WO, BO, training, workspaceMgr);
        INDArray rowMask = maskCopy == null ? null : maskCopy.reshape('c', b * n, 1);
        return new Saved(input, maskArray, mask, rowMask, x, q, k, v, a.output(), a.lse(), merged, z);
    }

    private static AttentionMask attentionMask(FlashAttentionLayer c, INDArray keyPadding) {
        if (!c.isCausal() && c.getSlidingWindow() == 0 && keyPadding == null) {
            return AttentionMask.none();
        }
        return AttentionMask.builder().causal(c.isCausal()).window(c.getSlidingWindow()).keyPadding(keyPadding)
                .build();
    }

    private INDArray project(INDArray in, String wKey, String bKey, boolean training, LayerWorkspaceMgr mgr) {
        return AttentionRows.affine(in, getParamWithNoise(wKey, training, mgr),
                getParamWithNoise(bKey, training, mgr));
    }

    private void checkInput(FlashAttentionLayer c) {
        AttentionRows.checkInput("FlashAttentionLayer", input, maskArray, c.dataFormat(), c.getNIn(), layerId());
    }

    private long timeSteps() {
        return AttentionRows.timeSteps(input, layerConf().dataFormat());
    }

    private INDArray toRows(INDArray a, long features) {
        return AttentionRows.toRows(a, features, layerConf().dataFormat());
    }

    private INDArray fromRows(INDArray rows, LayerWorkspaceMgr workspaceMgr, ArrayType type) {
        return AttentionRows.fromRows(rows, input.size(0), timeSteps(), layerConf().dataFormat(), workspaceMgr, type,
                dataType);
    }

    /**
     * Keeps the per-step mask: output step {@code t} is padding exactly when input step {@code t} is.
     */
    @Override
    public Pair<INDArray, MaskState> feedForwardMaskArray(INDArray maskArray, MaskState currentMaskState,
                                                          int minibatchSize) {
        setMaskArray(maskArray);
        this.maskState = currentMaskState;
        return new Pair<>(maskArray, currentMaskState);
    }

    /** Not a pretrainable layer. */
    @Override
    public boolean isPretrainLayer() {
        return false;
    }

    /** Also drops the arrays kept for backprop. */
    @Override
    public void clear() {
        super.clear();
        saved = null;
    }
}
