package org.attn4j.layers;

import static org.attn4j.layers.LayerNormParamInitializer.BIAS;
import static org.attn4j.layers.LayerNormParamInitializer.GAIN;

import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
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
 * {@link #backpropGradient} need not recompute them; the rest of the plumbing is {@link RowLayerImpl}'s.
 */
public class LayerNormLayerImpl extends RowLayerImpl<LayerNormLayer, LayerNormLayerImpl.Saved> {

    /**
     * What backprop needs from the training forward: the input and mask it saw (by identity, to tell whether it
     * is still current), the mask as a column {@code [B*N, 1]} (or null), {@code normed} u (the rows before gain
     * and bias), {@code invStd} r per row and the output {@code z}, detached.
     */
    record Saved(INDArray inputRef, INDArray maskRef, INDArray rowMask, INDArray normed, INDArray invStd,
                 INDArray z) implements SavedForward {
        @Override
        public void release() {
            RowLayerImpl.release(rowMask);
            RowLayerImpl.release(normed);
            RowLayerImpl.release(invStd);
            RowLayerImpl.release(z);
        }
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

    /** Normalises every row of the input, then gain and bias. */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        LayerNormLayer c = layerConf();
        checkInput();
        INDArray x = toRows(input, c.width());
        INDArray invStd = normalise(x, c.getEps(), !c.isRms());
        INDArray z = x.mulRowVector(getParamWithNoise(GAIN, training, workspaceMgr));
        if (!c.isRms()) {
            z.addiRowVector(getParamWithNoise(BIAS, training, workspaceMgr));
        }
        return new Saved(input, maskArray, AttentionRows.rowMask(maskArray, dataType), x, invStd, z);
    }

    /** Writes {@code dL/dg} and {@code dL/db}, returns dL/dx; {@code dz} is zero at padded steps. */
    @Override
    protected INDArray backpropToInput(Saved f, INDArray dz, LayerWorkspaceMgr workspaceMgr) {
        LayerNormLayer c = layerConf();
        INDArray weighted = dz.mul(f.normed());
        gradientViews.get(GAIN).assign(weighted.sum(true, 0));
        release(weighted);
        if (!c.isRms()) {
            gradientViews.get(BIAS).assign(dz.sum(true, 0));
        }
        INDArray du = dz.mulRowVector(getParamWithNoise(GAIN, true, workspaceMgr));
        return backpropNormalise(f.normed(), f.invStd(), du, !c.isRms());
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
        INDArray squares = x.mul(x);
        INDArray invStd = Transforms.pow(squares.mean(true, 1).addi(eps), -0.5, false);
        release(squares);
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
        INDArray products = du.mul(u);
        INDArray projection = products.mean(true, 1);
        release(products);
        if (center) {
            du.subiColumnVector(du.mean(true, 1));
        }
        INDArray along = u.mulColumnVector(projection);
        du.subi(along).muliColumnVector(invStd);
        release(along);
        return du;
    }
}
