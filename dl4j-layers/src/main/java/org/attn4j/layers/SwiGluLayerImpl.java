package org.attn4j.layers;

import static org.attn4j.layers.SwiGluParamInitializer.B_DOWN;
import static org.attn4j.layers.SwiGluParamInitializer.B_GATE;
import static org.attn4j.layers.SwiGluParamInitializer.B_UP;
import static org.attn4j.layers.SwiGluParamInitializer.W_DOWN;
import static org.attn4j.layers.SwiGluParamInitializer.W_GATE;
import static org.attn4j.layers.SwiGluParamInitializer.W_UP;

import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.ops.transforms.Transforms;

/**
 * Implementation of {@link SwiGluLayer}: hand-written forward and backward on rows {@code [B*N, features]}. A
 * training forward keeps the input, the gate's pre-activation and sigmoid, the up projection and the gated product
 * outside any workspace; the rest of the plumbing is {@link RowLayerImpl}'s.
 */
public class SwiGluLayerImpl extends RowLayerImpl<SwiGluLayer, SwiGluLayerImpl.Saved> {

    /** What backprop needs: the input and mask it saw (by identity), then the rows of x, a, sigmoid(a), u and h. */
    record Saved(INDArray inputRef, INDArray maskRef, INDArray rowMask, INDArray x, INDArray gate, INDArray sigmoid,
                 INDArray up, INDArray product, INDArray z) implements SavedForward {
        @Override
        public void release() {
            for (INDArray a : new INDArray[] {rowMask, x, gate, sigmoid, up, product, z}) {
                RowLayerImpl.release(a);
            }
        }
    }

    /**
     * Creates the layer for a configuration whose layer is a {@link SwiGluLayer}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    public SwiGluLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /** {@code a = x Wg + bg, u = x Wu + bu, h = silu(a) u, z = h Wd + bd}. */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        SwiGluLayer c = layerConf();
        checkInput();
        INDArray x = toRows(input, c.getNIn());
        INDArray gate = affine(x, W_GATE, B_GATE, training, workspaceMgr);
        INDArray up = affine(x, W_UP, B_UP, training, workspaceMgr);
        INDArray sigmoid = Transforms.sigmoid(gate, true);
        INDArray product = gate.mul(sigmoid).muli(up);
        INDArray z = affine(product, W_DOWN, B_DOWN, training, workspaceMgr);
        return new Saved(input, maskArray, AttentionRows.rowMask(maskArray, dataType), x, gate, sigmoid, up,
                product, z);
    }

    private INDArray affine(INDArray in, String w, String b, boolean training, LayerWorkspaceMgr mgr) {
        return AttentionRows.affine(in, getParamWithNoise(w, training, mgr),
                optionalParam(b, training, mgr));
    }

    /**
     * With {@code s = sigmoid(a)}: {@code dh = dz Wd^T}, {@code du = dh silu(a)},
     * {@code da = dh u s (1 + a (1 - s))}, {@code dx = da Wg^T + du Wu^T}; the weight and bias gradients on the way.
     */
    @Override
    protected INDArray backpropToInput(Saved f, INDArray dz, LayerWorkspaceMgr workspaceMgr) {
        INDArray dh = AttentionRows.backpropAffine(f.product(), dz, getParamWithNoise(W_DOWN, true, workspaceMgr),
                gradientViews.get(W_DOWN), gradientViews.get(B_DOWN));
        INDArray silu = f.gate().mul(f.sigmoid());
        INDArray du = dh.mul(silu);
        release(silu);
        INDArray siluSlope = f.sigmoid().rsub(1).muli(f.gate()).addi(1).muli(f.sigmoid());
        INDArray da = dh.muli(f.up()).muli(siluSlope);
        release(siluSlope);
        INDArray dx = AttentionRows.backpropAffine(f.x(), da, getParamWithNoise(W_GATE, true, workspaceMgr),
                gradientViews.get(W_GATE), gradientViews.get(B_GATE));
        release(da);
        INDArray dxUp = AttentionRows.backpropAffine(f.x(), du, getParamWithNoise(W_UP, true, workspaceMgr),
                gradientViews.get(W_UP), gradientViews.get(B_UP));
        release(du);
        dx.addi(dxUp);
        release(dxUp);
        return dx;
    }
}
