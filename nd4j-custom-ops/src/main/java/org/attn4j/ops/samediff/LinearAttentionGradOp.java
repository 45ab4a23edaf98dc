package org.attn4j.ops.samediff;

import java.util.ArrayList;
import java.util.List;

import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * The gradient of {@link LinearAttentionOp}: inputs are that op's inputs followed by dO and dKvOut; outputs dQ, dK,
 * dV, then dKvIn if the forward op had a state input and dLambda if it had a decay input (summed over heads when
 * one lambda is shared). The chunk states are rebuilt from the inputs (one extra forward scan) rather than kept
 * between the passes. No second derivative.
 */
public final class LinearAttentionGradOp extends JavaBackedOp {

    static final String NAME = "attn4j_linear_attention_bp";

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public LinearAttentionGradOp() {
    }

    LinearAttentionGradOp(SameDiff sd, SDVariable[] inputs, long[] iArgs, double[] tArgs) {
        super(sd, inputs);
        addIArgument(iArgs);
        addTArgument(tArgs);
    }

    @Override
    public String opName() {
        return NAME;
    }

    private LinearAttentionOp.Settings settings() {
        return LinearAttentionOp.settings(iArgs(), tArgs());
    }

    @Override
    public int getNumOutputs() {
        LinearAttentionOp.Settings s = settings();
        return s.differentiable();
    }

    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        LinearAttentionOp.Settings s = settings();
        FlashAttentionOp.requireInputs(in, s.inputs() + 2, s.inputs() + 2);
        return shapesOf(in, s.differentiable());
    }

    @Override
    protected List<DataType> outputTypes(List<DataType> in) {
        return new ArrayList<>(in.subList(0, getNumOutputs()));
    }

    @Override
    protected void compute(INDArray[] in, INDArray[] out) {
        LinearAttentionOp.Settings s = settings();
        int n = s.inputs();
        LinearAttention op = s.hasDecayInput() ? LinearAttention.defaults().withDecayGradient()
                : LinearAttention.defaults();
        LinearAttentionGradients g = op.backward(in[0], in[1], in[2], s.decay(in), s.causal(), s.kvIn(in), in[n],
                in[n + 1], null, s.documents(in));
        out[0].assign(g.dq());
        out[1].assign(g.dk());
        out[2].assign(g.dv());
        int next = 3;
        if (s.hasKvIn()) {
            out[next++].assign(g.dKvIn());
        }
        if (s.hasDecayInput()) {
            INDArray dDecay = g.dDecay();
            INDArray target = out[next];
            if (target.length() == 1) {
                target.assign(dDecay.sumNumber());
            } else {
                target.assign(dDecay.reshape(target.shape()));
            }
        }
    }

}
