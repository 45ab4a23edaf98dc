package org.attn4j.layers;

import static org.attn4j.layers.LayerNormParamInitializer.BIAS;
import static org.attn4j.layers.LayerNormParamInitializer.GAIN;

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
import org.nd4j.linalg.ops.transforms.Transforms;

/**
 * Implementation of {@link LayerNormLayer}: hand-written forward and backward (not a SameDiffLayer, whose
 * gradients are doubled in DL4J 1.0.0-M2.1).
 *
 * <p>Inside, activations are handled as rows {@code [B*N, width]} (row {@code b*N + t}), one row per example
 * and step, and every reduction runs along a row: no step reads another. A training forward keeps the
 * normalised rows and {@code 1 / sqrt(var + eps)} per row outside any workspace, so that
 * {@link #backpropGradient} need not recompute them.
 */
public class LayerNormLayerImpl extends BaseLayer<LayerNormLayer> {

    private transient Saved saved;

    /**
     * What backprop needs from the training forward: the input and mask it saw (by identity, to tell whether it
     * is still current), the mask as a column {@code [B*N, 1]} (or null), {@code normed} u (the rows before gain
     * and bias) and {@code invStd} r per row, detached.
     */
    record Saved(INDArray inputRef, INDArray maskRef, INDArray rowMask, INDArray normed, INDArray invStd) {
    }

    /**
     * Creates the layer for a configuration whose layer is a {@link LayerNormLayer}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    public LayerNormLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /**
     * Forward pass: input {@code [B, width, N]} (NCW) or {@code [B, N, width]} (NWC) to output of the same shape,
     * in the ACTIVATIONS workspace; zero at steps the mask marks as padding.
     *
     * @throws DL4JInvalidInputException if the input or mask shape does not fit the layer
     */
    @Override
    public INDArray activate(boolean training, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(false);
        applyDropOutIfNecessary(training, workspaceMgr);
        Saved f;
        if (training) {
            f = AttentionRows.outsideWorkspaces(this::forward);
            saved = f;
        } else {
            saved = null;
            f = forward();
        }
        INDArray y = f.normed().mulRowVector(getParamWithNoise(GAIN, training, workspaceMgr));
        if (!layerConf().isRms()) {
            y.addiRowVector(getParamWithNoise(BIAS, training, workspaceMgr));
        }
        if (f.rowMask() != null) {
            y.muliColumnVector(f.rowMask());
        }
        return fromRows(y, workspaceMgr, ArrayType.ACTIVATIONS);
    }

    /**
     * Backward pass for the last training forward (recomputed if the input or mask changed since): fills this
     * layer's gradient view ({@code dL/dg}, {@code dL/db}) and returns dL/dInput in the input's layout, in the
     * ACTIVATION_GRAD workspace; both are zero at padded steps.
     *
     * @param epsilon dL/dOutput in the output's layout
     */
    @Override
    public Pair<Gradient, INDArray> backpropGradient(INDArray epsilon, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(true);
        Saved f = saved;
        if (f == null || f.inputRef() != input || f.maskRef() != maskArray) {
            f = AttentionRows.outsideWorkspaces(this::forward);
        }
        saved = null;
        LayerNormLayer c = layerConf();

        INDArray dy = AttentionRows.toRows(epsilon, c.width(), c.dataFormat());
        if (f.rowMask() != null) {
            dy.muliColumnVector(f.rowMask());
        }
        gradientViews.get(GAIN).assign(dy.mul(f.normed()).sum(true, 0));
        if (!c.isRms()) {
            gradientViews.get(BIAS).assign(dy.sum(true, 0));
        }
        INDArray du = dy.muliRowVector(getParamWithNoise(GAIN, true, workspaceMgr));
        INDArray dx = backpropNormalise(f.normed(), f.invStd(), du, !c.isRms());

        Gradient gradient = new DefaultGradient(gradientsFlattened);
        for (String key : c.initializer().paramKeys(c)) {
            gradient.gradientForVariable().put(key, gradientViews.get(key));
        }
        weightNoiseParams.clear();

        INDArray epsOut = backpropDropOutIfPresent(fromRows(dx, workspaceMgr, ArrayType.ACTIVATION_GRAD));
        return new Pair<>(gradient, epsOut);
    }

    /** Normalises every row of the input (before gain and bias) and keeps what backprop needs. */
    private Saved forward() {
        LayerNormLayer c = layerConf();
        AttentionRows.checkInput("LayerNormLayer", input, maskArray, c.dataFormat(), c.width(), layerId());
        INDArray x = AttentionRows.toRows(input, c.width(), c.dataFormat());
        INDArray invStd = normalise(x, c.getEps(), !c.isRms());
        return new Saved(input, maskArray, AttentionRows.rowMask(maskArray, dataType), x, invStd);
    }

    /**
     * Normalises each row of {@code x} in place to {@code u = (x - mean(x)) r} with
     * {@code r = 1 / sqrt(mean((x - mean(x))^2) + eps)}, or without {@code center} to {@code u = x r} with
     * {@code r = 1 / sqrt(mean(x^2) + eps)}.
     *
     * @param x      rows {@code [R, width]}, overwritten with u
     * @param eps    added to the mean square inside the square root
     * @param center subtract the row mean (LayerNorm) or not (RMSNorm)
     * @return r, a column {@code [R, 1]}
     */
    static INDArray normalise(INDArray x, double eps, boolean center) {
        if (center) {
            // two passes: the mean first, then the variance of the centred rows (no E[x^2] - E[x]^2 cancellation)
            x.subiColumnVector(x.mean(true, 1));
        }
        INDArray invStd = Transforms.pow(x.mul(x).mean(true, 1).addi(eps), -0.5, false);
        x.muliColumnVector(invStd);
        return invStd;
    }

    /**
     * Backprop of {@link #normalise} per row of width D, from {@code du = dL/du} to dL/dx. With
     * {@code d r / d x_j = -r^3 (x_j - mean(x)) / D} and {@code u = (x - mean(x)) r}:
     * <pre>
     *   LayerNorm: dx = r (du - mean(du) - u mean(du . u))
     *   RMSNorm:   dx = r (du - u mean(du . u))
     * </pre>
     * exact for any eps (nothing assumes {@code mean(u^2) = 1}).
     *
     * @param u      the normalised rows {@code [R, width]}
     * @param invStd r per row {@code [R, 1]}
     * @param du     dL/du {@code [R, width]}, overwritten with dL/dx
     * @param center whether the forward subtracted the row mean
     * @return dL/dx, {@code du}'s array
     */
    static INDArray backpropNormalise(INDArray u, INDArray invStd, INDArray du, boolean center) {
        INDArray projection = du.mul(u).mean(true, 1);
        if (center) {
            du.subiColumnVector(du.mean(true, 1));
        }
        return du.subi(u.mulColumnVector(projection)).muliColumnVector(invStd);
    }

    private INDArray fromRows(INDArray rows, LayerWorkspaceMgr workspaceMgr, ArrayType type) {
        LayerNormLayer c = layerConf();
        return AttentionRows.fromRows(rows, input.size(0), AttentionRows.timeSteps(input, c.dataFormat()),
                c.dataFormat(), workspaceMgr, type, dataType);
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
