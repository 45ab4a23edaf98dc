package org.attn4j.ops.samediff;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.attn4j.ops.Documents;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * {@link LinearAttention} (LASP, section 2.2) as a SameDiff op: inputs q {@code [B, H, N, D]}, k and v
 * {@code [B, Hkv, N, D]}, then optionally the incoming state {@code kvIn [B, H, D, D]} and a decay variable
 * {@code lambda [H]} or {@code [1]} (for a learned decay); outputs O {@code [B, H, N, D]} and the final state
 * {@code kvOut [B, H, D, D]}. Settings (op arguments): integers {@code causal, hasKvIn, hasDecayInput}; floats the
 * fixed decay values when there is no decay input. Its gradient is {@link LinearAttentionGradOp}. Built by
 * {@link SDAttention#linear}.
 */
public final class LinearAttentionOp extends JavaBackedOp {

    static final String NAME = "attn4j_linear_attention";

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public LinearAttentionOp() {
    }

    LinearAttentionOp(SameDiff sd, SDVariable[] inputs, boolean causal, boolean hasKvIn, boolean hasDecayInput,
                      boolean hasDocuments, double[] fixedDecay) {
        super(sd, inputs);
        addIArgument(causal ? 1 : 0, hasKvIn ? 1 : 0, hasDecayInput ? 1 : 0, hasDocuments ? 1 : 0);
        addTArgument(fixedDecay);
    }

    @Override
    public String opName() {
        return NAME;
    }

    @Override
    public int getNumOutputs() {
        return 2;
    }

    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        Settings s = settings(iArgs(), tArgs());
        FlashAttentionOp.requireInputs(in, s.inputs(), s.inputs());
        long[] q = in[0].shape();
        if (q.length != 4) {
            throw new IllegalArgumentException("SDAttention.linear: q must be [B, H, N, D], got " + Arrays.toString(q));
        }
        return List.of(shapeOf(in[0], q), shapeOf(in[0], q[0], q[1], q[3], q[3]));
    }

    @Override
    protected List<DataType> outputTypes(List<DataType> in) {
        return List.of(in.get(0), in.get(0));
    }

    @Override
    protected void compute(INDArray[] in, INDArray[] out) {
        Settings s = settings(iArgs(), tArgs());
        LinearAttentionOutput r = LinearAttention.defaults().forward(in[0], in[1], in[2], s.decay(in), s.causal(),
                s.kvIn(in), s.documents(in));
        out[0].assign(r.output());
        out[1].assign(r.kvOut());
    }

    @Override
    public List<SDVariable> doDiff(List<SDVariable> grads) {
        SDVariable[] a = args();
        List<SDVariable> gin = new ArrayList<>(Arrays.asList(a));
        gin.add(gradientOf(grads, 0));
        gin.add(gradientOf(grads, 1));
        SDVariable[] d = new LinearAttentionGradOp(sameDiff, gin.toArray(new SDVariable[0]), iArgs(), tArgs())
                .outputVariables();
        return gradients(d);
    }

    /** The op's settings as stored in its arguments, shared with the gradient op. */
    record Settings(boolean causal, boolean hasKvIn, boolean hasDecayInput, boolean hasDocuments,
                    double[] fixedDecay) {

        /** Every input of the op. */
        int inputs() {
            return differentiable() + (hasDocuments ? 1 : 0);
        }

        /** The inputs with a gradient: q, k, v, and kvIn and the decay when they are inputs. */
        int differentiable() {
            return 3 + (hasKvIn ? 1 : 0) + (hasDecayInput ? 1 : 0);
        }

        Documents documents(INDArray[] in) {
            return hasDocuments ? Documents.of(in[differentiable()]) : null;
        }

        INDArray kvIn(INDArray[] in) {
            return hasKvIn ? in[3] : null;
        }

        INDArray decayInput(INDArray[] in) {
            return hasDecayInput ? in[hasKvIn ? 4 : 3] : null;
        }

        Decay decay(INDArray[] in) {
            INDArray d = decayInput(in);
            if (d == null) {
                return fixedDecay.length == 0 ? Decay.none() : Decay.perHead(fixedDecay);
            }
            if (d.rank() > 1 && d.length() != d.size(0)) {
                throw new IllegalArgumentException("SDAttention.linear: decay must be [H] or [1], got "
                        + Arrays.toString(d.shape()));
            }
            return Decay.perHead(d.toDoubleVector());
        }
    }

    static Settings settings(long[] i, double[] t) {
        return new Settings(i[0] != 0, i[1] != 0, i[2] != 0, i.length > 3 && i[3] != 0, t);
    }
}
