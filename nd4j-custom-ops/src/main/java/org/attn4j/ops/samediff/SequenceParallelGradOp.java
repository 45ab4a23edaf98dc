package org.attn4j.ops.samediff;

import java.util.List;

import org.attn4j.ops.flash.AttentionGradients;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * The gradient of {@link SequenceParallelOp}: inputs the local q, k, v, O and dO; outputs the local dQ, dK, dV from
 * the bound algorithm's backward pass (a collective: every worker runs it in step). No second derivative.
 */
public final class SequenceParallelGradOp extends JavaBackedOp {

    static final String NAME = "attn4j_sequence_parallel_attention_bp";

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public SequenceParallelGradOp() {
    }

    SequenceParallelGradOp(SameDiff sd, SDVariable[] inputs, String key, double scale) {
        super(sd, inputs);
        addSArgument(key);
        addTArgument(scale);
    }

    @Override
    public String opName() {
        return NAME;
    }

    @Override
    public int getNumOutputs() {
        return 3;
    }

    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        FlashAttentionOp.requireInputs(in, 5, 5);
        return shapesOf(in, 3);
    }

    @Override
    protected List<DataType> outputTypes(List<DataType> in) {
        return in.subList(0, 3);
    }

    @Override
    protected void compute(INDArray[] in, INDArray[] out) {
        AttentionGradients g = SequenceParallelOp.binding(getSArgument(0))
                .backward(in[0], in[1], in[2], in[3], in[4], getTArgument(0));
        out[0].assign(g.dq());
        out[1].assign(g.dk());
        out[2].assign(g.dv());
    }

}
