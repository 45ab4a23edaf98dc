package org.attn4j.layers;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.api.MaskState;
import org.deeplearning4j.nn.api.layers.RecurrentLayer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.gradient.DefaultGradient;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.layers.BaseLayer;
import org.deeplearning4j.nn.workspace.ArrayType;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.common.primitives.Pair;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The forward and backward plumbing attn4j's layer implementations share (attention, linear attention, layer
 * norm, positional embedding), around a concrete layer's
 * {@link #forward} (input to {@code z}, the output before the activation) and {@link #backpropToInput}
 * ({@code dL/dz} to {@code dL/dx}): dropout, the activation, the mask on the output, keeping a training forward
 * for backprop, DL4J's gradient table, the per-step mask, the RNN layouts, and the use of the layer's parameters
 * that a ZeRO stage-3 trainer turns into a gather ({@link SequenceParallel#useParameters}).
 *
 * <p>Stateful inference ({@code rnnTimeStep}, DL4J's convention for it in MultiLayerNetwork and ComputationGraph):
 * {@link #rnnTimeStep} runs the inference forward with {@link #stepping()} true, and a layer that carries something
 * from one call to the next (a key/value cache, a state, the next position) keeps it in {@link #stepState}, which
 * {@code rnnClearPreviousState} empties. Truncated BPTT is not used by these layers: its calls run the ordinary
 * passes.
 *
 * <p>Inside, activations are handled as rows {@code [B*N, features]} (row {@code b*N + t}). A training forward
 * runs outside any workspace, so that {@link #backpropGradient} need not recompute what it kept.
 *
 * @param <C> the layer configuration
 * @param <S> what the concrete forward keeps for backprop
 */
public abstract class RowLayerImpl<C extends RecurrentFeedForwardLayer, S extends RowLayerImpl.SavedForward>
        extends BaseLayer<C> implements RecurrentLayer {

    private transient S saved;
    /** What a layer carries from one {@link #rnnTimeStep} to the next; empty at the start of a sequence. */
    protected transient Map<String, INDArray> stepState = new HashMap<>();
    private transient boolean stepping;

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

        /**
         * Frees the arrays this forward made for backprop and nothing else holds (called once the backward pass is
         * done with them), instead of leaving them to the garbage collector: ND4J frees an array's memory only when
         * its Java object is collected, which for arrays that lived through a few collections can take many steps.
         */
        default void release() {
        }
    }

    /**
     * Creates the layer for a configuration whose layer is a {@code C}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    protected RowLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
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
        // The identity (every attn4j layer's default) needs neither a copy of z nor z itself for backprop.
        boolean identity = isIdentity();
        INDArray z = f.z();
        INDArray y = identity ? z : layerConf().getActivationFn().getActivation(z.dup(), training);
        if (f.rowMask() != null) {
            y.muliColumnVector(f.rowMask());
        }
        INDArray out = fromRows(y, workspaceMgr, ArrayType.ACTIVATIONS);
        if (identity) {
            release(z);                                   // copied out
        }
        return out;
    }

    private boolean isIdentity() {
        return layerConf().getActivationFn() instanceof ActivationIdentity;
    }

    /** Frees {@code a} now if it is a whole array outside any workspace that is not freed yet; null is ignored. */
    public static void release(INDArray a) {
        if (a != null && a.closeable() && !a.wasClosed()) {
            a.close();
        }
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
        INDArray epsOut;
        try (SequenceParallel.ParameterUse use = SequenceParallel.useParameters(paramsFlattened)) {
            S f = saved;
            if (f == null || f.inputRef() != input || f.maskRef() != maskArray) {
                f = forwardOutsideWorkspaces(workspaceMgr);
            }
            saved = null;
            checkEpsilon(epsilon);
            INDArray eps = toRows(epsilon, c.getNOut());
            if (f.rowMask() != null) {
                eps.muliColumnVector(f.rowMask());
            }
            INDArray dz = isIdentity() ? eps : c.getActivationFn().backprop(f.z().dup(), eps).getFirst();
            INDArray dx = backpropToInput(f, dz, workspaceMgr);
            epsOut = fromRows(dx, workspaceMgr, ArrayType.ACTIVATION_GRAD);
            // the rows of dL/dOutput and dL/dInput were this call's own; what the forward kept is done with
            release(dx);
            release(eps);
            f.release();
        }

        Gradient gradient = new DefaultGradient(gradientsFlattened);
        for (String key : c.initializer().paramKeys(c)) {
            gradient.gradientForVariable().put(key, gradientViews.get(key));
        }
        weightNoiseParams.clear();

        return new Pair<>(gradient, backpropDropOutIfPresent(epsOut));
    }

    /** A training forward whose arrays outlive the workspaces open now, so that backprop can use them. */
    private S forwardOutsideWorkspaces(LayerWorkspaceMgr workspaceMgr) {
        return AttentionRows.outsideWorkspaces(() -> forward(true, workspaceMgr));
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

    /**
     * Checks that dL/dOutput has the output's shape.
     *
     * @throws DL4JInvalidInputException naming the layer, the expected and the actual shape
     */
    private void checkEpsilon(INDArray epsilon) {
        C c = layerConf();
        long[] expected = c.dataFormat() == RNNFormat.NCW ? new long[] {input.size(0), c.getNOut(), timeSteps()}
                : new long[] {input.size(0), timeSteps(), c.getNOut()};
        if (!Arrays.equals(epsilon.shape(), expected)) {
            throw new DL4JInvalidInputException(c.layerType() + ": epsilon must have the output's shape "
                    + Arrays.toString(expected) + ", got " + Arrays.toString(epsilon.shape()) + " " + layerId());
        }
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

    /**
     * The parameter {@code key} (with weight noise in training), or null where the layer has none (a switched-off
     * bias).
     */
    protected INDArray optionalParam(String key, boolean training, LayerWorkspaceMgr mgr) {
        return params.containsKey(key) ? getParamWithNoise(key, training, mgr) : null;
    }

    /**
     * Keeps {@code value} in {@link #stepState} under {@code key}: a copy outside every workspace, since the
     * workspaces of this call reuse their memory in the next one.
     */
    protected void keep(String key, INDArray value) {
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            stepState.put(key, value.dup());
        }
    }

    /** A number kept in {@link #stepState} under {@code key} (outside every workspace), or {@code absent}. */
    protected int keptInt(String key, int absent) {
        INDArray v = stepState.get(key);
        return v == null ? absent : v.getInt(0);
    }

    /** Keeps the number {@code value} under {@code key}: in place once there (no allocation per step). */
    protected void keep(String key, int value) {
        INDArray kept = stepState.get(key);
        if (kept != null) {
            kept.putScalar(0, value);
            return;
        }
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            stepState.put(key, Nd4j.createFromArray(value));
        }
    }

    /** Whether the forward running now is a step of {@code rnnTimeStep} (inference that continues a sequence). */
    protected boolean stepping() {
        return stepping;
    }

    /**
     * The next steps of the sequences seen so far: the inference forward on {@code input} ({@code [B, nIn, T]} or
     * {@code [B, T, nIn]}), continuing from what earlier calls left in {@link #stepState}.
     */
    @Override
    public INDArray rnnTimeStep(INDArray input, LayerWorkspaceMgr workspaceMgr) {
        setInput(input, workspaceMgr);
        stepping = true;
        try {
            return activate(false, workspaceMgr);
        } finally {
            stepping = false;
        }
    }

    /**
     * A copy of what the layer carries to the next {@link #rnnTimeStep}: the layer updates its own arrays in place
     * (a cache grows into room it already has), so a state taken here stays as it was.
     */
    @Override
    public Map<String, INDArray> rnnGetPreviousState() {
        return copyOutside(stepState);
    }

    /** Continues from {@code stateMap} (one that {@link #rnnGetPreviousState} gave), copied. */
    @Override
    public void rnnSetPreviousState(Map<String, INDArray> stateMap) {
        stepState = copyOutside(stateMap);
    }

    private static Map<String, INDArray> copyOutside(Map<String, INDArray> state) {
        Map<String, INDArray> copy = new HashMap<>();
        try (MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces()) {
            state.forEach((key, value) -> copy.put(key, value.dup()));
        }
        return copy;
    }

    /** Starts the next {@code rnnTimeStep} at the beginning of a sequence. */
    @Override
    public void rnnClearPreviousState() {
        stepState = new HashMap<>();
    }

    /** Truncated BPTT's forward: the ordinary forward (these layers keep no state across training segments). */
    @Override
    public INDArray rnnActivateUsingStoredState(INDArray input, boolean training, boolean storeLastForTBPTT,
                                                LayerWorkspaceMgr workspaceMgr) {
        setInput(input, workspaceMgr);
        return activate(training, workspaceMgr);
    }

    @Override
    public Map<String, INDArray> rnnGetTBPTTState() {
        return new HashMap<>();
    }

    @Override
    public void rnnSetTBPTTState(Map<String, INDArray> state) {
        // no state across truncated BPTT segments
    }

    /** Truncated BPTT's backward: the ordinary backward. */
    @Override
    public Pair<Gradient, INDArray> tbpttBackpropGradient(INDArray epsilon, int tbpttBackLength,
                                                          LayerWorkspaceMgr workspaceMgr) {
        return backpropGradient(epsilon, workspaceMgr);
    }
}
