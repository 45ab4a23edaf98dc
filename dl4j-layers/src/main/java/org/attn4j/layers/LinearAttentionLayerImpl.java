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
import org.attn4j.ops.linear.LocalLinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
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
public class LinearAttentionLayerImpl
        extends AttentionLayerBaseImpl<LinearAttentionLayer, LinearAttentionLayerImpl.Saved> {

    private transient LinearAttention op;

    /**
     * What backprop needs from the training forward: the input and mask it saw (by identity), the rest
     * detached. {@code merged} m is the heads' output as rows, {@code invRms} {@code 1 / sqrt(mean(m^2) + eps)}
     * per row, {@code normed} {@code m * invRms}, {@code gained} {@code normed * g}, {@code z} before the
     * activation.
     */
    record Saved(INDArray inputRef, INDArray maskRef, INDArray rowMask, Decay decay, INDArray x,
                 INDArray q, INDArray k, INDArray v, AttentionPass<?> attention, INDArray invRms, INDArray normed, INDArray gained, INDArray z) implements SavedForward {
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

    /** Output projection, norm, linear attention (and the decay when learned) and input projections. */
    @Override
    protected INDArray backpropToInput(Saved f, INDArray dz, LayerWorkspaceMgr workspaceMgr) {
        LinearAttentionLayer c = layerConf();
        INDArray dGained = backpropProjection(f.gained(), dz, WO, BO, workspaceMgr);
        INDArray dMerged = backpropNorm(f, dGained, workspaceMgr);

        INDArray dO = AttentionRows.toHeads(dMerged, input.size(0), timeSteps(), c.getNHeads());
        LinearAttentionGradients g = f.attention().backwardLinear(f.q(), f.k(), f.v(), dO);
        INDArray dk = AttentionRows.fromHeads(g.dk());
        INDArray dv = AttentionRows.fromHeads(g.dv());
        if (f.rowMask() != null) {
            dk.muliColumnVector(f.rowMask());
            dv.muliColumnVector(f.rowMask());
        }
        INDArray dx = backpropInputProjections(f.x(), AttentionRows.fromHeads(g.dq()), dk, dv, workspaceMgr);
        if (c.isLearnDecay()) {
            backpropDecay(f.decay(), g.dDecay());
        }
        return dx;
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

    /** Projections, linear attention, norm and output projection (before the activation), as rows. */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        LinearAttentionLayer c = layerConf();
        checkInput();
        long b = input.size(0);
        long n = timeSteps();
        INDArray rowMask = AttentionRows.rowMask(maskArray, dataType);

        INDArray x = toRows(input, c.getNIn());
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
        AttentionPass<?> a = stepping() ? step(q, k, v, decay)
                : AttentionPass.forwardLinear(SequenceParallel.linear(c.layerType() + " " + layerId(), b, n,
                        maskArray != null, op(), decay, c.isCausal()), q, k, v);

        INDArray merged = AttentionRows.fromHeads(a.output());
        INDArray invRms = Transforms.pow(merged.mul(merged).mean(true, 1).addi(LinearAttentionLayer.NORM_EPS), -0.5,
                false);
        INDArray normed = merged.mulColumnVector(invRms);
        INDArray gained = normed.mulRowVector(getParamWithNoise(GAIN, training, workspaceMgr));
        INDArray z = project(gained, WO, BO, training, workspaceMgr);
        return new Saved(input, maskArray, rowMask, decay, x, q, k, v, a, invRms, normed, gained, z);
    }

    /** Key of the {@code D x D} state per head in {@link #stepState}. */
    private static final String KV = "kv";

    /**
     * One {@code rnnTimeStep}: the new steps continue from the state the earlier calls left, {@code [B, H, D, D]}:
     * O(1) time and memory per new step, whatever the context.
     *
     * @throws DL4JInvalidInputException for a layer that is not causal, or a batch that changed size
     */
    private AttentionPass<?> step(INDArray q, INDArray k, INDArray v, Decay decay) {
        LinearAttentionLayer c = layerConf();
        if (!c.isCausal()) {
            throw new DL4JInvalidInputException(c.layerType() + " " + layerId() + ": rnnTimeStep needs a causal "
                    + "layer (a step of a non-causal one depends on later steps)");
        }
        if (SequenceParallel.current() != null) {
            throw new DL4JInvalidInputException(c.layerType() + " " + layerId() + ": rnnTimeStep on a worker of a "
                    + "sequence-parallel group is for softmax attention layers; decode linear attention on one "
                    + "device (its state is O(1) per step)");
        }
        INDArray kv = stepState.get(KV);
        if (kv != null && kv.size(0) != q.size(0)) {
            throw new DL4JInvalidInputException(c.layerType() + " " + layerId() + ": rnnTimeStep continues "
                    + kv.size(0) + " sequences, got a batch of " + q.size(0)
                    + "; call rnnClearPreviousState() to start new ones");
        }
        AttentionPass<?> a = AttentionPass.forwardLinear(new LocalLinearAttention(op(), decay, true)
                .withIncomingState(kv), q, k, v);
        keep(KV, a.linearState());
        return a;
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
}
