package org.attn4j.layers;

import static org.attn4j.layers.LinearAttentionParamInitializer.BK;
import static org.attn4j.layers.LinearAttentionParamInitializer.BO;
import static org.attn4j.layers.LinearAttentionParamInitializer.BQ;
import static org.attn4j.layers.LinearAttentionParamInitializer.BV;
import static org.attn4j.layers.LinearAttentionParamInitializer.GAIN;
import static org.attn4j.layers.LinearAttentionParamInitializer.THETA;
import static org.attn4j.layers.LinearAttentionParamInitializer.WK;
import static org.attn4j.layers.LinearAttentionParamInitializer.WO;
import static org.attn4j.layers.LinearAttentionParamInitializer.WQ;
import static org.attn4j.layers.LinearAttentionParamInitializer.WV;

import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionCache;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
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
 * Implementation of {@link LinearAttentionLayer}: hand-written forward and backward around
 * {@link LinearAttention}, the RMS norm and the projections.
 *
 * <p>Inside, activations are handled as rows {@code [B*N, features]} (row {@code b*N + t}) and heads as
 * {@code [B, H, N, hs]}, C order. A training forward keeps q, k, v, the op's per-chunk states (LASP's KV state
 * caching, section 2.3) and the norm's input and output outside any workspace, so that
 * {@link #backpropGradient} need not recompute them.
 */
public class LinearAttentionLayerImpl extends BaseLayer<LinearAttentionLayer> {

    private transient LinearAttention op;
    private transient Saved saved;

    /**
     * What backprop needs from the training forward: the input and mask it saw (by identity), the rest
     * detached. {@code merged} m is the heads' output as rows, {@code invRms} {@code 1 / sqrt(mean(m^2) + eps)}
     * per row, {@code normed} {@code m * invRms}, {@code gained} {@code normed * g}, {@code z} before the
     * activation.
     */
    private record Saved(INDArray inputRef, INDArray maskRef, INDArray rowMask, Decay decay, INDArray x,
                         INDArray q, INDArray k, INDArray v, LinearAttentionCache cache, INDArray invRms,
                         INDArray normed, INDArray gained, INDArray z) {
    }

    /**
     * Creates the layer for a configuration whose layer is a {@link LinearAttentionLayer}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    public LinearAttentionLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
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
            f = AttentionRows.outsideWorkspaces(() -> forward(true, workspaceMgr));
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
     * Backward pass for the last training forward: fills this layer's gradient view and returns dL/dInput in
     * the input's layout, in the ACTIVATION_GRAD workspace.
     *
     * @param epsilon dL/dOutput in the output's layout
     */
    @Override
    public Pair<Gradient, INDArray> backpropGradient(INDArray epsilon, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(true);
        Saved f = saved;
        if (f == null || f.inputRef() != input || f.maskRef() != maskArray) {
            f = AttentionRows.outsideWorkspaces(() -> forward(true, workspaceMgr));
        }
        saved = null;
        LinearAttentionLayer c = layerConf();
        long b = input.size(0);
        long n = timeSteps();

        INDArray eps = AttentionRows.toRows(epsilon, c.getNOut(), c.dataFormat());
        if (f.rowMask() != null) {
            eps.muliColumnVector(f.rowMask());
        }
        INDArray dz = c.getActivationFn().backprop(f.z().dup(), eps).getFirst();
        INDArray dGained = backpropProjection(f.gained(), dz, WO, BO, workspaceMgr);
        INDArray dMerged = backpropNorm(f, dGained, workspaceMgr);

        INDArray dO = AttentionRows.toHeads(dMerged, b, n, c.getNHeads());
        LinearAttentionGradients g = op().backward(f.q(), f.k(), f.v(), f.decay(), c.isCausal(), null, dO, null,
                f.cache());
        INDArray dk = AttentionRows.fromHeads(g.dk());
        INDArray dv = AttentionRows.fromHeads(g.dv());
        if (f.rowMask() != null) {
            dk.muliColumnVector(f.rowMask());
            dv.muliColumnVector(f.rowMask());
        }
        INDArray dx = backpropProjection(f.x(), AttentionRows.fromHeads(g.dq()), WQ, BQ, workspaceMgr);
        dx.addi(backpropProjection(f.x(), dk, WK, BK, workspaceMgr));
        dx.addi(backpropProjection(f.x(), dv, WV, BV, workspaceMgr));
        if (c.isLearnDecay()) {
            backpropDecay(f.decay(), g.dDecay());
        }

        Gradient gradient = new DefaultGradient(gradientsFlattened);
        for (String key : c.initializer().paramKeys(c)) {
            gradient.gradientForVariable().put(key, gradientViews.get(key));
        }
        weightNoiseParams.clear();

        INDArray epsOut = backpropDropOutIfPresent(fromRows(dx, workspaceMgr, ArrayType.ACTIVATION_GRAD));
        return new Pair<>(gradient, epsOut);
    }

    /**
     * Backprop of {@code a = g . m r} with {@code r = 1 / sqrt(mean(m^2) + eps)} per row, {@code u = m r}:
     * writes dL/dg, returns {@code dL/dm = r (du - u mean(du . u))} with {@code du = g . da}.
     */
    private INDArray backpropNorm(Saved f, INDArray dGained, LayerWorkspaceMgr workspaceMgr) {
        INDArray u = f.normed();
        gradientViews.get(GAIN).assign(dGained.mul(u).sum(true, 0));
        INDArray du = dGained.mulRowVector(getParamWithNoise(GAIN, true, workspaceMgr));
        INDArray mean = du.mul(u).mean(true, 1);
        return du.subi(u.mulColumnVector(mean)).muliColumnVector(f.invRms());
    }

    /** {@code dL/dtheta = dL/dlambda * lambda (1 - lambda)} for {@code lambda = sigmoid(theta)}. */
    private void backpropDecay(Decay decay, INDArray dLambda) {
        double[] d = dLambda.castTo(DataType.DOUBLE).toDoubleVector();
        INDArray dTheta = gradientViews.get(THETA);
        for (int h = 0; h < d.length; h++) {
            double lambda = decay.lambda(h);
            dTheta.putScalar(0, h, d[h] * lambda * (1 - lambda));
        }
    }

    /** For {@code out = in W + b}: writes dL/dW and dL/db into the gradient views, returns dL/din. */
    private INDArray backpropProjection(INDArray in, INDArray dOut, String wKey, String bKey,
                                        LayerWorkspaceMgr workspaceMgr) {
        return AttentionRows.backpropAffine(in, dOut, getParamWithNoise(wKey, true, workspaceMgr),
                gradientViews.get(wKey), gradientViews.get(bKey));
    }

    /** Projections, linear attention, norm and output projection (before the activation), as rows. */
    private Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        LinearAttentionLayer c = layerConf();
        AttentionRows.checkInput("LinearAttentionLayer", input, maskArray, c.dataFormat(), c.getNIn(), layerId());
        long b = input.size(0);
        long n = timeSteps();
        INDArray rowMask = AttentionRows.rowMask(maskArray, dataType);

        INDArray x = AttentionRows.toRows(input, c.getNIn(), c.dataFormat());
        INDArray qRows = project(x, WQ, BQ, training, workspaceMgr);
        INDArray kRows = project(x, WK, BK, training, workspaceMgr);
        INDArray vRows = project(x, WV, BV, training, workspaceMgr);
        if (rowMask != null) {
            // padded steps add nothing to the state
            kRows.muliColumnVector(rowMask);
            vRows.muliColumnVector(rowMask);
        }
        INDArray q = AttentionRows.toHeads(qRows, b, n, c.getNHeads());
        INDArray k = AttentionRows.toHeads(kRows, b, n, c.getNKvHeads());
        INDArray v = AttentionRows.toHeads(vRows, b, n, c.getNKvHeads());
        Decay decay = decay(training, workspaceMgr);
        LinearAttentionOutput a = op().forward(q, k, v, decay, c.isCausal(), null);

        INDArray merged = AttentionRows.fromHeads(a.output());
        INDArray invRms = Transforms.pow(merged.mul(merged).mean(true, 1).addi(LinearAttentionLayer.NORM_EPS), -0.5,
                false);
        INDArray normed = merged.mulColumnVector(invRms);
        INDArray gained = normed.mulRowVector(getParamWithNoise(GAIN, training, workspaceMgr));
        INDArray z = project(gained, WO, BO, training, workspaceMgr);
        return new Saved(input, maskArray, rowMask, decay, x, q, k, v, a.cache(), invRms, normed, gained, z);
    }

    /** The decay of this pass: none when not causal, {@code sigmoid(theta)} when learned, else the configured. */
    private Decay decay(boolean training, LayerWorkspaceMgr workspaceMgr) {
        LinearAttentionLayer c = layerConf();
        if (!c.isCausal() || !c.isLearnDecay()) {
            return c.configuredDecay();
        }
        double[] theta = getParamWithNoise(THETA, training, workspaceMgr).castTo(DataType.DOUBLE).toDoubleVector();
        double[] lambda = new double[theta.length];
        for (int h = 0; h < theta.length; h++) {
            lambda[h] = 1 / (1 + Math.exp(-theta[h]));
        }
        return Decay.perHead(lambda);
    }

    private LinearAttention op() {
        if (op == null) {
            LinearAttentionLayer c = layerConf();
            LinearAttention base = c.getChunkSize() > 0 ? LinearAttention.withChunk(c.getChunkSize(), 0)
                    : LinearAttention.defaults();
            op = c.isLearnDecay() ? base.withDecayGradient() : base;
        }
        return op;
    }

    private INDArray project(INDArray in, String wKey, String bKey, boolean training, LayerWorkspaceMgr mgr) {
        return AttentionRows.affine(in, getParamWithNoise(wKey, training, mgr),
                getParamWithNoise(bKey, training, mgr));
    }

    private long timeSteps() {
        return AttentionRows.timeSteps(input, layerConf().dataFormat());
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
