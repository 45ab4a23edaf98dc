package org.attn4j.ops.samediff;

import java.util.Arrays;
import java.util.List;

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
 * optionally key padding {@code [B, Nk]}; outputs O {@code [B, H, Nq, D]} and LSE {@code [B, H, Nq]}. Settings
 * (op arguments, so they survive save/load): integers {@code causal (0/1), window}, float {@code scale} (0 = the
 * default {@code 1/sqrt(D)}). Its gradient is {@link FlashAttentionGradOp}, which recomputes the score tiles from
 * q, k, v and LSE: no {@code N x N} array in either pass. Built by {@link SDAttention#flash}.
 */
public final class FlashAttentionOp extends JavaBackedOp {

    static final String NAME = "attn4j_flash_attention";

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public FlashAttentionOp() {
    }

    FlashAttentionOp(SameDiff sd, SDVariable[] inputs, boolean causal, int window, double scale) {
        super(sd, inputs);
        addIArgument(causal ? 1 : 0, window);
        addTArgument(scale);
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

    /** The mask these settings and this key padding (or null) describe. */
    static AttentionMask mask(boolean causal, int window, INDArray keyPadding) {
        return AttentionMask.builder().causal(causal).window(window).keyPadding(keyPadding).build();
    }


    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        requireInputs(in, 3, 4);
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
                mask(causal(), window(), in.length > 3 ? in[3] : null), FlashAttention.resolveScale(scale(), q.size(3)));
        out[0].assign(r.output());
        out[1].assign(r.lse());
    }

    /** dQ, dK, dV from {@link FlashAttentionGradOp}; the key padding is not differentiable (zeros). */
    @Override
    public List<SDVariable> doDiff(List<SDVariable> grads) {
        SDVariable[] a = args();
        SDVariable[] o = outputVariables();
        SDVariable[] gin = a.length > 3
                ? new SDVariable[] {a[0], a[1], a[2], o[0], o[1], gradientOf(grads, 0), gradientOf(grads, 1), a[3]}
                : new SDVariable[] {a[0], a[1], a[2], o[0], o[1], gradientOf(grads, 0), gradientOf(grads, 1)};
        SDVariable[] d = new FlashAttentionGradOp(sameDiff, gin, causal(), window(), scale()).outputVariables();
        return gradients(d[0], d[1], d[2]);
    }

    static void requireInputs(INDArray[] in, int min, int max) {
        if (in.length < min || in.length > max) {
            throw new IllegalArgumentException("SDAttention: expected " + min + (max > min ? " to " + max : "")
                    + " inputs, got " + in.length);
        }
    }
}
