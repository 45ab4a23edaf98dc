package org.attn4j.layers;

import static org.attn4j.layers.PositionalEmbeddingParamInitializer.P;

import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.impl.scatter.ScatterAdd;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

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
 * agrees with the forward even if the context changed in between. The feature mask passes through unchanged. The
 * rest of the plumbing (rows, layouts, dropout, the gradient table) is {@link RowLayerImpl}'s.
 */
public class PositionalEmbeddingLayerImpl
        extends RowLayerImpl<PositionalEmbeddingLayer, PositionalEmbeddingLayerImpl.Saved> {

    private static final String NAME = "PositionalEmbeddingLayer";

    /**
     * What backprop needs from the training forward: the input and mask it saw (by identity), the positions its
     * steps were embedded at, the mask as a column {@code [B*N, 1]} (or null) and the output rows. Padded steps
     * pass through rather than being zeroed, so the plumbing gets no row mask.
     */
    record Saved(INDArray inputRef, INDArray maskRef, int[] positions, INDArray stepMask, INDArray z)
            implements SavedForward {
        /** None: padded steps are copied unchanged, not zeroed. */
        @Override
        public INDArray rowMask() {
            return null;
        }
    }

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
     * The input plus the rows of {@code P} at the steps' positions; steps the mask marks as padding unchanged.
     *
     * @throws DL4JInvalidInputException if a sequence-parallel input does not have as many steps as the worker
     *                                   holds positions, or if a position is at or beyond {@code maxLength}
     */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        PositionalEmbeddingLayer c = layerConf();
        checkInput();
        int[] positions = positions();
        long b = input.size(0);
        INDArray stepMask = AttentionRows.rowMask(maskArray, dataType);
        INDArray z = toRows(input, c.width());
        INDArray rows = Nd4j.pullRows(getParamWithNoise(P, training, workspaceMgr), 1, positions);
        for (long e = 0; e < b; e++) {
            INDArray steps = z.get(NDArrayIndex.interval(e * positions.length, (e + 1) * positions.length),
                    NDArrayIndex.all());
            steps.addi(stepMask == null ? rows : rows.mulColumnVector(steps(stepMask, e, positions.length)));
        }
        return new Saved(input, maskArray, positions, stepMask, z);
    }

    /**
     * Writes dL/dP, returns dL/dx = dL/dz. Row {@code pos_t} of dL/dP receives the (masked) batch sum of
     * {@code dz} at step {@code t}; the positions of one input are distinct, so each row receives at most one
     * step.
     */
    @Override
    protected INDArray backpropToInput(Saved f, INDArray dz, LayerWorkspaceMgr workspaceMgr) {
        PositionalEmbeddingLayer c = layerConf();
        int n = f.positions().length;
        INDArray masked = f.stepMask() == null ? dz : dz.mulColumnVector(f.stepMask());
        INDArray perStep = masked.reshape('c', dz.size(0) / n, n, c.width()).sum(0);     // [N, width]
        INDArray zeros = Nd4j.zeros(dataType, c.getMaxLength(), c.width());
        gradientViews.get(P).assign(Nd4j.exec(new ScatterAdd(zeros, Nd4j.createFromArray(f.positions()),
                perStep))[0]);
        return dz;
    }

    /** The positions of the next {@code n} steps of {@code rnnTimeStep}: they continue where the last call ended. */
    private int[] nextPositions(int n) {
        int from = keptInt(NEXT, 0);
        keep(NEXT, from + n);
        int[] positions = new int[n];
        for (int t = 0; t < n; t++) {
            positions[t] = from + t;
        }
        return positions;
    }

    /** Key of the next position in {@link #stepState}. */
    private static final String NEXT = "next";

    /** Example {@code e}'s rows of a column {@code [B*N, 1]}. */
    private static INDArray steps(INDArray column, long e, int n) {
        return column.get(NDArrayIndex.interval(e * n, (e + 1) * n), NDArrayIndex.all());
    }

    /**
     * The global position of each time step of the input, after checking, in a sequence-parallel run, the step
     * count.
     *
     * @throws DL4JInvalidInputException naming the layer and what was expected
     */
    private int[] positions() {
        PositionalEmbeddingLayer c = layerConf();
        int n = (int) timeSteps();
        // rnnTimeStep on one device continues from the last call; on a worker, the group's context says where.
        int[] positions = stepping() && SequenceParallel.current() == null ? nextPositions(n)
                : SequenceParallel.positions(NAME + " " + layerId(), n);
        for (int t = 0; t < n; t++) {
            if (positions[t] < 0 || positions[t] >= c.getMaxLength()) {
                throw new DL4JInvalidInputException(NAME + " " + layerId() + ": time step " + t + " is at position "
                        + positions[t] + ", but maxLength is " + c.getMaxLength() + " (positions 0 to "
                        + (c.getMaxLength() - 1) + " have an embedding); "
                        + SequenceParallel.lengthHint(n));
            }
        }
        return positions;
    }
}
