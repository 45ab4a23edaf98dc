package org.attn4j.ops.samediff;

import java.util.List;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * The gradient of {@link FlashAttentionOp}: inputs q, k, v, O, LSE, dO, dLSE and the op's optional inputs (key
 * padding, documents);
 * outputs dQ, dK, dV. A gradient reaching LSE enters through {@code Delta}: since
 * {@code dLSE_i/dS_ij = P_ij}, {@code dS = P * (dP - Delta + dLSE)}, so the flash backward pass runs with
 * {@code Delta - dLSE} in place of {@code Delta = rowsum(O * dO)} (FlashAttention-2, algorithm 2, line 4).
 * No second derivative.
 */
public final class FlashAttentionGradOp extends JavaBackedOp {

    static final String NAME = "attn4j_flash_attention_bp";

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public FlashAttentionGradOp() {
    }

    FlashAttentionGradOp(SameDiff sd, SDVariable[] inputs, boolean causal, int window, int optional, double scale) {
        super(sd, inputs);
        addIArgument(causal ? 1 : 0, window, optional);
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
        FlashAttentionOp.requireInputs(in, 7, 9);
        return shapesOf(in, 3);
    }

    @Override
    protected List<DataType> outputTypes(List<DataType> in) {
        return in.subList(0, 3);
    }

    @Override
    protected void compute(INDArray[] in, INDArray[] out) {
        INDArray q = in[0];
        INDArray delta = FlashAttention.delta(in[3], in[5]).subi(in[6]);
        AttentionGradients g = FlashAttention.defaults().backwardFromDelta(q, in[1], in[2], delta, in[4], in[5],
                FlashAttentionOp.mask(getIArgument(0) != 0, getIArgument(1).intValue(),
                        FlashAttentionOp.optional(iArgs(), in.length - 7), in, 7),
                FlashAttention.resolveScale(getTArgument(0), q.size(3)));
        out[0].assign(g.dq());
        out[1].assign(g.dk());
        out[2].assign(g.dv());
    }

}
