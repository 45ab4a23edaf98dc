package org.attn4j.layers;

import static org.attn4j.layers.AttentionParamInitializer.BK;
import static org.attn4j.layers.AttentionParamInitializer.BQ;
import static org.attn4j.layers.AttentionParamInitializer.BV;
import static org.attn4j.layers.AttentionParamInitializer.WK;
import static org.attn4j.layers.AttentionParamInitializer.WQ;
import static org.attn4j.layers.AttentionParamInitializer.WV;

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
 * The forward and backward plumbing the attention layer implementations share, around a concrete layer's
 * {@link #forward} (input to {@code z}, the output before the activation) and {@link #backpropToInput}
 * ({@code dL/dz} to {@code dL/dx}): dropout, the activation, the mask on the output, keeping a training forward
 * for backprop, DL4J's gradient table, the per-step mask and the RNN layouts.
 *
 * <p>Inside, activations are handled as rows {@code [B*N, features]} (row {@code b*N + t}). A training forward
 * runs outside any workspace, so that {@link #backpropGradient} need not recompute what it kept.
 *
 * @param <C> the layer configuration
 * @param <S> what the concrete forward keeps for backprop
 */
public abstract class AttentionLayerBaseImpl<C extends AttentionLayerBase,
        S extends AttentionLayerBaseImpl.SavedForward> extends BaseLayer<C> {

    private transient S saved;

    /**
     * What a forward keeps for backprop: the input and mask it saw (by identity, to tell whether it is still
     * current), the rest detached.
     */
    protected interface SavedForward {
        /** The input the forward saw. */
        INDArray inputRef();

        /** The mask the forward saw, or null. */
        INDArray maskRef();

        /** The mask as a column {@code [B*N, 1]}, or null for none. */
        INDArray rowMask();

        /** The output before the activation, rows {@code [B*N, nOut]}. */
        INDArray z();
    }

    /**
     * Creates the layer for a configuration whose layer is a {@code C}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    protected AttentionLayerBaseImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /**
     * The concrete layer's forward up to the output before the activation, as rows.
     *
     * @param training     whether parameters are taken with training-time weight noise
     * @param workspaceMgr the workspaces of this pass
     * @throws DL4JInvalidInputException if the input or mask shape does not fit the layer
     */
    protected abstract S forward(boolean training, LayerWorkspaceMgr workspaceMgr);

    /**
     * The concrete layer's backward from {@code dL/dz} (rows, the output before the activation, zero at padded
     * steps): writes every parameter's gradient into its gradient view and returns {@code dL/dx} as rows.
     *
     * @param f            the training forward of this input and mask
     * @param dz           dL/dz, rows {@code [B*N, nOut]}
     * @param workspaceMgr the workspaces of this pass
     */
    protected abstract INDArray backpropToInput(S f, INDArray dz, LayerWorkspaceMgr workspaceMgr);

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
        S f;
        try (SequenceParallel.ParameterUse use = SequenceParallel.useParameters(paramsFlattened)) {
            if (training) {
                f = forwardOutsideWorkspaces(workspaceMgr);
                saved = f;
            } else {
                saved = null;
                f = forward(false, workspaceMgr);
            }
        }
        INDArray y = layerConf().getActivationFn().getActivation(f.z().dup(), training);
        if (f.rowMask() != null) {
            y.muliColumnVector(f.rowMask());
        }
        return fromRows(y, workspaceMgr, ArrayType.ACTIVATIONS);
    }

    /**
     * Backward pass for the last training forward (recomputed if the input or mask changed since): fills this
     * layer's gradient view and returns dL/dInput in the input's layout, in the ACTIVATION_GRAD workspace.
     *
     * @param epsilon dL/dOutput in the output's layout
     */
    @Override
    public Pair<Gradient, INDArray> backpropGradient(INDArray epsilon, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(true);
        C c = layerConf();
        INDArray dx;
        try (SequenceParallel.ParameterUse use = SequenceParallel.useParameters(paramsFlattened)) {
            S f = saved;
            if (f == null || f.inputRef() != input || f.maskRef() != maskArray) {
                f = forwardOutsideWorkspaces(workspaceMgr);
            }
            saved = null;
            INDArray eps = toRows(epsilon, c.getNOut());
            if (f.rowMask() != null) {
                eps.muliColumnVector(f.rowMask());
            }
            INDArray dz = c.getActivationFn().backprop(f.z().dup(), eps).getFirst();
            dx = backpropToInput(f, dz, workspaceMgr);
        }

        Gradient gradient = new DefaultGradient(gradientsFlattened);
        for (String key : c.initializer().paramKeys(c)) {
            gradient.gradientForVariable().put(key, gradientViews.get(key));
        }
        weightNoiseParams.clear();

        INDArray epsOut = backpropDropOutIfPresent(fromRows(dx, workspaceMgr, ArrayType.ACTIVATION_GRAD));
        return new Pair<>(gradient, epsOut);
    }

    /** A training forward whose arrays outlive the workspaces open now, so that backprop can use them. */
    private S forwardOutsideWorkspaces(LayerWorkspaceMgr workspaceMgr) {
        return AttentionRows.outsideWorkspaces(() -> forward(true, workspaceMgr));
    }

    /** {@code in W + b} for the projection with weights {@code wKey} and bias {@code bKey}. */
    protected INDArray project(INDArray in, String wKey, String bKey, boolean training, LayerWorkspaceMgr mgr) {
        return AttentionRows.affine(in, getParamWithNoise(wKey, training, mgr),
                getParamWithNoise(bKey, training, mgr));
    }

    /** For {@code out = in W + b}: writes dL/dW and dL/db into the gradient views, returns dL/din. */
    protected INDArray backpropProjection(INDArray in, INDArray dOut, String wKey, String bKey,
                                          LayerWorkspaceMgr workspaceMgr) {
        return AttentionRows.backpropAffine(in, dOut, getParamWithNoise(wKey, true, workspaceMgr),
                gradientViews.get(wKey), gradientViews.get(bKey));
    }

    /**
     * Backprop of the q, k and v projections of rows {@code x}: writes their weight and bias gradients, returns
     * dL/dx as rows.
     *
     * @param dq dL/dq as rows {@code [B*N, H*hs]}
     * @param dk dL/dk as rows {@code [B*N, Hkv*hs]}
     * @param dv dL/dv as rows {@code [B*N, Hkv*hs]}
     */
    protected INDArray backpropInputProjections(INDArray x, INDArray dq, INDArray dk, INDArray dv,
                                                LayerWorkspaceMgr workspaceMgr) {
        INDArray dx = backpropProjection(x, dq, WQ, BQ, workspaceMgr);
        dx.addi(backpropProjection(x, dk, WK, BK, workspaceMgr));
        dx.addi(backpropProjection(x, dv, WV, BV, workspaceMgr));
        return dx;
    }

    /**
     * Checks the input and mask against the configuration.
     *
     * @throws DL4JInvalidInputException naming the layer, the expected and the actual shape
     */
    protected void checkInput() {
        C c = layerConf();
        AttentionRows.checkInput(c.layerType(), input, maskArray, c.dataFormat(), c.getNIn(), layerId());
    }

    /** The input's sequence length. */
    protected long timeSteps() {
        return AttentionRows.timeSteps(input, layerConf().dataFormat());
    }

    /** {@code a} in the layer's layout to a fresh C-order {@code [B*N, features]}. */
    protected INDArray toRows(INDArray a, long features) {
        return AttentionRows.toRows(a, features, layerConf().dataFormat());
    }

    private INDArray fromRows(INDArray rows, LayerWorkspaceMgr workspaceMgr, ArrayType type) {
        return AttentionRows.fromRows(rows, input.size(0), timeSteps(), layerConf().dataFormat(), workspaceMgr, type,
                dataType);
    }

    /** Keeps the per-step mask: output step {@code t} is padding exactly when input step {@code t} is. */
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
