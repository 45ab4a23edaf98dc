package org.attn4j.ops.samediff;

import java.util.Arrays;
import java.util.List;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * {@link FlashAttention} as a SameDiff op: inputs q {@code [B, H, Nq, D]}, k and v {@code [B, Hkv, Nk, D]} and
 * optionally key padding {@code [B, Nk]} and document ids {@code [B, N]} (int32/int64, packed sequences); outputs O {@code [B, H, Nq, D]} and LSE {@code [B, H, Nq]}. Settings
 * (op arguments, so they survive save/load): integers {@code causal (0/1), window, optional inputs (1 key padding,
 * 2 documents; absent in graphs saved before documents: a fourth input is the key padding)}, float {@code scale} (0 = the
 * default {@code 1/sqrt(D)}). Its gradient is {@link FlashAttentionGradOp}, which recomputes the score tiles from
 * q, k, v and LSE: no {@code N x N} array in either pass. Built by {@link SDAttention#flash}.
 */
public final class FlashAttentionOp extends JavaBackedOp {

    static final String NAME = "attn4j_flash_attention";

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public FlashAttentionOp() {
    }

    FlashAttentionOp(SameDiff sd, SDVariable[] inputs, boolean causal, int window, int optional, double scale) {
        super(sd, inputs);
        addIArgument(causal ? 1 : 0, window, optional);
        addTArgument(scale);
    }

    /** Which optional inputs follow q, k, v: 1 key padding, 2 documents (both: padding first). */
    static final int PADDING = 1;
    /** See {@link #PADDING}. */
    static final int DOCUMENTS = 2;

    /** The optional inputs of an op with these integer arguments and {@code extra} inputs after q, k, v. */
    static int optional(long[] iArgs, int extra) {
        return iArgs.length > 2 ? (int) iArgs[2] : extra > 0 ? PADDING : 0;
    }

    /** The mask of these settings with the optional inputs found from index {@code at} of {@code in}. */
    static AttentionMask mask(boolean causal, int window, int optional, INDArray[] in, int at) {
        INDArray padding = (optional & PADDING) != 0 ? in[at++] : null;
        Documents documents = (optional & DOCUMENTS) != 0 ? Documents.of(in[at]) : null;
        return AttentionMask.builder().causal(causal).window(window).keyPadding(padding).documents(documents).build();
    }

    @Override
    public String opName() {
        return NAME;
    }

    @Override
    public int getNumOutputs() {
        return 2;
    }

    boolean causal() {
        return getIArgument(0) != 0;
    }

    int window() {
        return getIArgument(1).intValue();
    }

    double scale() {
        return getTArgument(0);
    }



    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        requireInputs(in, 3, 5);
        INDArray q = in[0];
        long[] s = q.shape();
        if (s.length != 4) {
            throw new IllegalArgumentException("SDAttention.flash: q must be [B, H, Nq, D], got "
                    + Arrays.toString(s));
        }
        return List.of(shapeOf(q, s), shapeOf(q, s[0], s[1], s[2]));
    }

    @Override
    protected List<DataType> outputTypes(List<DataType> in) {
        return List.of(in.get(0), in.get(0));
    }

    @Override
    protected void compute(INDArray[] in, INDArray[] out) {
        INDArray q = in[0];
        AttentionOutput r = FlashAttention.defaults().forward(q, in[1], in[2],
                mask(causal(), window(), optional(iArgs(), in.length - 3), in, 3),
                FlashAttention.resolveScale(scale(), q.size(3)));
        out[0].assign(r.output());
        out[1].assign(r.lse());
    }

    /** dQ, dK, dV from {@link FlashAttentionGradOp}; key padding and documents are not differentiable (zeros). */
    @Override
    public List<SDVariable> doDiff(List<SDVariable> grads) {
        SDVariable[] a = args();
        SDVariable[] o = outputVariables();
        List<SDVariable> gin = new java.util.ArrayList<>(List.of(a[0], a[1], a[2], o[0], o[1], gradientOf(grads, 0),
                gradientOf(grads, 1)));
        gin.addAll(Arrays.asList(a).subList(3, a.length));
        SDVariable[] d = new FlashAttentionGradOp(sameDiff, gin.toArray(new SDVariable[0]), causal(), window(),
                optional(iArgs(), a.length - 3), scale()).outputVariables();
        return gradients(d[0], d[1], d[2]);
    }

    static void requireInputs(INDArray[] in, int min, int max) {
        if (in.length < min || in.length > max) {
            throw new IllegalArgumentException("SDAttention: expected " + min + (max > min ? " to " + max : "")
                    + " inputs, got " + in.length);
        }
    }
}
