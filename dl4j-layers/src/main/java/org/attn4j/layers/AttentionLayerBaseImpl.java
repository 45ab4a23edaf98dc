package org.attn4j.layers;

import static org.attn4j.layers.AttentionParamInitializer.BK;
import static org.attn4j.layers.AttentionParamInitializer.BQ;
import static org.attn4j.layers.AttentionParamInitializer.BV;
import static org.attn4j.layers.AttentionParamInitializer.WK;
import static org.attn4j.layers.AttentionParamInitializer.WQ;
import static org.attn4j.layers.AttentionParamInitializer.WV;

import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * What the attention layer implementations add to {@link RowLayerImpl}: the affine projections of rows and their
 * backprop into the gradient views.
 *
 * @param <C> the layer configuration
 * @param <S> what the concrete forward keeps for backprop
 */
public abstract class AttentionLayerBaseImpl<C extends AttentionLayerBase, S extends RowLayerImpl.SavedForward>
        extends RowLayerImpl<C, S> {

    /**
     * Creates the layer for a configuration whose layer is a {@code C}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    protected AttentionLayerBaseImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /** {@code in W + b} for the projection with weights {@code wKey} and bias {@code bKey}. */
    protected INDArray project(INDArray in, String wKey, String bKey, boolean training, LayerWorkspaceMgr mgr) {
        return AttentionRows.affine(in, getParamWithNoise(wKey, training, mgr),
                optionalParam(bKey, training, mgr));
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
        INDArray part = backpropProjection(x, dk, WK, BK, workspaceMgr);
        dx.addi(part);
        release(part);
        part = backpropProjection(x, dv, WV, BV, workspaceMgr);
        dx.addi(part);
        release(part);
        return dx;
    }
}
