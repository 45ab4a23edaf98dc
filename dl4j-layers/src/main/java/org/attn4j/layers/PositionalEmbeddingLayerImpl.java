package org.attn4j.layers;

import static org.attn4j.layers.PositionalEmbeddingParamInitializer.P;

import java.util.Arrays;

import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.gradient.DefaultGradient;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.layers.BaseLayer;
import org.deeplearning4j.nn.workspace.ArrayType;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.common.primitives.Pair;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.impl.scatter.ScatterAdd;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Implementation of {@link PositionalEmbeddingLayer}: hand-written forward and backward (not a SameDiffLayer,
 * whose gradients are doubled in DL4J 1.0.0-M2.1).
 * <pre>
 *   forward    out[b, t] = x[b, t] + m[b, t] P[pos_t]            m the feature mask (1 where none)
 *   backward   dL/dx[b, t] = dL/dout[b, t]
 *              dL/dP[p]    = sum over t with pos_t = p, over b of m[b, t] dL/dout[b, t]    (0 for unused rows)
 * </pre>
 * {@code pos_t} is {@code t} on one device and {@code SequenceParallel.current().positions()[t]} on a worker's shard
 * of a sequence-parallel run. The positions a training forward used are kept for its backward, so the backward
 * agrees with the forward even if the context changed in between. The feature mask passes through unchanged.
 */
public class PositionalEmbeddingLayerImpl extends BaseLayer<PositionalEmbeddingLayer> {

    private static final String NAME = "PositionalEmbeddingLayer";

    /** The input of the last training forward (by identity), and the positions its steps were embedded at. */
    private transient INDArray embeddedInput;
    private transient int[] embeddedPositions;

    /**
     * Creates the layer for a configuration whose layer is a {@link PositionalEmbeddingLayer}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    public PositionalEmbeddingLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /**
     * Forward pass: input {@code [B, width, N]} (NCW) or {@code [B, N, width]} (NWC) plus the rows of {@code P} at
     * the steps' positions, in the ACTIVATIONS workspace; steps the mask marks as padding are copied unchanged.
     *
     * @throws DL4JInvalidInputException if the input or mask shape does not fit the layer, if a
     *                                   sequence-parallel input does not have as many steps as the worker holds
     *                                   positions, or if a position is at or beyond {@code maxLength}
     */
    @Override
    public INDArray activate(boolean training, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(false);
        applyDropOutIfNecessary(training, workspaceMgr);
        int[] positions = positions();
        embeddedInput = training ? input : null;
        embeddedPositions = training ? positions : null;

        INDArray rows = Nd4j.pullRows(getParamWithNoise(P, training, workspaceMgr), 1, positions);
        INDArray out = workspaceMgr.dup(ArrayType.ACTIVATIONS, input, 'c');
        return out.addi(masked(inLayout(rows)));
    }

    /**
     * Backward pass for the last training forward: writes dL/dP into the gradient view and returns dL/dInput
     * (dL/dOutput itself, through dropout if any) in the ACTIVATION_GRAD workspace.
     *
     * @param epsilon dL/dOutput in the output's layout
     * @throws DL4JInvalidInputException if {@code epsilon} does not have the input's shape
     */
    @Override
    public Pair<Gradient, INDArray> backpropGradient(INDArray epsilon, LayerWorkspaceMgr workspaceMgr) {
        assertInputSet(true);
        if (!Arrays.equals(epsilon.shape(), input.shape())) {
            throw new DL4JInvalidInputException(NAME + ": epsilon must have the input's shape "
                    + Arrays.toString(input.shape()) + ", got " + Arrays.toString(epsilon.shape()) + " " + layerId());
        }
        int[] positions = embeddedInput == input ? embeddedPositions : positions();
        embeddedInput = null;
        embeddedPositions = null;

        INDArray dP = gradientViews.get(P);
        dP.assign(positionGradient(epsilon, positions));
        Gradient gradient = new DefaultGradient(gradientsFlattened);
        gradient.gradientForVariable().put(P, dP);
        weightNoiseParams.clear();

        INDArray dx = workspaceMgr.dup(ArrayType.ACTIVATION_GRAD, epsilon, 'c');
        return new Pair<>(gradient, backpropDropOutIfPresent(dx));
    }

    /**
     * {@code [maxLength, width]}: row {@code pos_t} receives the (masked) batch sum of epsilon at step {@code t}.
     * The positions of one input are distinct, so each row receives at most one step.
     */
    private INDArray positionGradient(INDArray epsilon, int[] positions) {
        PositionalEmbeddingLayer c = layerConf();
        INDArray perStep = masked(epsilon).sum(0);                           // [width, N] or [N, width]
        INDArray rows = (c.dataFormat() == RNNFormat.NCW ? perStep.transpose() : perStep).dup('c');
        INDArray zeros = Nd4j.zeros(dataType, c.getMaxLength(), c.width());
        return Nd4j.exec(new ScatterAdd(zeros, Nd4j.createFromArray(positions), rows))[0];
    }

    /** Rows {@code [N, width]} as {@code [1, width, N]} (NCW) or {@code [1, N, width]} (NWC), to broadcast. */
    private INDArray inLayout(INDArray rows) {
        long n = rows.size(0);
        long w = rows.size(1);
        if (layerConf().dataFormat() == RNNFormat.NCW) {
            return rows.transpose().dup('c').reshape('c', 1, w, n);
        }
        return rows.reshape('c', 1, n, w);
    }

    /** {@code a} with the steps the mask marks as padding zeroed (broadcast over features), or {@code a}. */
    private INDArray masked(INDArray a) {
        if (maskArray == null) {
            return a;
        }
        long b = maskArray.size(0);
        long n = maskArray.size(1);
        INDArray m = maskArray.castTo(dataType).dup('c');
        return a.mul(layerConf().dataFormat() == RNNFormat.NCW ? m.reshape('c', b, 1, n) : m.reshape('c', b, n, 1));
    }

    /**
     * The global position of each time step of the input, after checking the input, the mask and, in a
     * sequence-parallel run, the step count.
     *
     * @throws DL4JInvalidInputException naming the layer and what was expected
     */
    private int[] positions() {
        PositionalEmbeddingLayer c = layerConf();
        AttentionRows.checkInput(NAME, input, maskArray, c.dataFormat(), c.width(), layerId());
        int n = (int) AttentionRows.timeSteps(input, c.dataFormat());
        SequenceParallel.Context sp = SequenceParallel.current();
        int[] positions;
        if (sp != null) {
            // a per-step mask is no obstacle here, unlike in attention: every step is embedded on its own
            SequenceParallel.checkShard(sp, NAME + " " + layerId(), n, false);
            positions = sp.positions();
        } else {
            positions = new int[n];
            Arrays.setAll(positions, t -> t);
        }
        for (int t = 0; t < n; t++) {
            if (positions[t] < 0 || positions[t] >= c.getMaxLength()) {
                throw new DL4JInvalidInputException(NAME + " " + layerId() + ": time step " + t + " is at position "
                        + positions[t] + ", but maxLength is " + c.getMaxLength() + " (positions 0 to "
                        + (c.getMaxLength() - 1) + " have an embedding); "
                        + (sp == null ? "sequences of " + n + " steps need maxLength >= " + n
                                : "the sequence-parallel run has N = " + sp.length()));
            }
        }
        return positions;
    }

    /** Not a pretrainable layer. */
    @Override
    public boolean isPretrainLayer() {
        return false;
    }

    /** Also forgets the positions kept for backprop. */
    @Override
    public void clear() {
        super.clear();
        embeddedInput = null;
        embeddedPositions = null;
    }
}
