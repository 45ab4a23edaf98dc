package org.attn4j.ops.samediff;

import java.util.Arrays;
import java.util.List;

import org.attn4j.ops.rope.RotaryEmbedding;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.shade.jackson.core.JsonProcessingException;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * {@link RotaryEmbedding} as a SameDiff op: input x {@code [B, H, N, D]} and optionally its positions (integers,
 * {@code [N]} shared by the batch or {@code [B, N]}; without them 0 to N-1); output x rotated at those positions.
 * Settings (op arguments, so they survive save/load): the embedding as JSON (string), integers {@code direction}
 * (1 rotates, -1 applies the transposed rotation) and {@code length} (the global sequence length dynamic scaling
 * grows theta from; 0 = the largest position + 1). The gradient is the same op with the direction reversed: the
 * rotation is linear. Built by {@link SDAttention#rope} and the attention functions' {@code rope(...)}.
 */
public final class RotaryOp extends JavaBackedOp {

    static final String NAME = "attn4j_rotary";
    private static final ObjectMapper JSON = new ObjectMapper();

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public RotaryOp() {
    }

    RotaryOp(SameDiff sd, SDVariable[] inputs, RotaryEmbedding rope, int direction, int length) {
        super(sd, inputs);
        try {
            addSArgument(JSON.writeValueAsString(rope));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("RotaryOp: cannot write " + rope + " as JSON", e);
        }
        addIArgument(direction, length);
    }

    @Override
    public String opName() {
        return NAME;
    }

    @Override
    public int getNumOutputs() {
        return 1;
    }

    RotaryEmbedding rope() {
        try {
            return JSON.readValue(getSArgument(0), RotaryEmbedding.class);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("RotaryOp: unreadable settings " + getSArgument(0), e);
        }
    }

    int direction() {
        return getIArgument(0).intValue();
    }

    int length() {
        return getIArgument(1).intValue();
    }

    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        FlashAttentionOp.requireInputs(in, 1, 2);
        if (in[0].rank() != 4) {
            throw new IllegalArgumentException("SDAttention.rope: x must be [B, H, N, D], got "
                    + Arrays.toString(in[0].shape()));
        }
        return List.of(shapeOf(in[0], in[0].shape()));
    }

    @Override
    protected List<DataType> outputTypes(List<DataType> in) {
        return List.of(in.get(0));
    }

    @Override
    protected void compute(INDArray[] in, INDArray[] out) {
        INDArray x = in[0];
        int[][] positions = positions(in.length > 1 ? in[1] : null, x);
        int longest = 0;
        for (int[] row : positions) {
            for (int p : row) {
                longest = Math.max(longest, p + 1);
            }
        }
        RotaryEmbedding rope = rope();
        RotaryEmbedding.Table table = rope.table((int) x.size(3), positions, length() > 0 ? length() : longest);
        out[0].assign(direction() > 0 ? rope.rotate(x, table) : rope.rotateBack(x, table));
    }

    /** The positions input as rows (one shared row, or one per sequence); 0 to N-1 without one. */
    static int[][] positions(INDArray p, INDArray x) {
        long n = x.size(2);
        if (p == null) {
            int[] row = new int[(int) n];
            Arrays.setAll(row, i -> i);
            return new int[][] {row};
        }
        boolean shared = p.rank() == 1 && p.size(0) == n;
        boolean perSequence = p.rank() == 2 && p.size(0) == x.size(0) && p.size(1) == n;
        if (!p.dataType().isIntType() || !(shared || perSequence)) {
            throw new IllegalArgumentException("SDAttention.rope: positions must be integers [" + n + "] or ["
                    + x.size(0) + ", " + n + "] for x " + Arrays.toString(x.shape()) + ", got " + p.dataType() + " "
                    + Arrays.toString(p.shape()));
        }
        int[][] rows = shared ? new int[][] {p.toIntVector()} : p.toIntMatrix();
        for (int[] row : rows) {
            for (int v : row) {
                if (v < 0) {
                    throw new IllegalArgumentException("SDAttention.rope: positions must be >= 0, got " + v);
                }
            }
        }
        return rows;
    }

    /** The transposed rotation of the incoming gradient, at the same positions; positions get none. */
    @Override
    public List<SDVariable> doDiff(List<SDVariable> grads) {
        SDVariable[] a = args();
        SDVariable g = gradientOf(grads, 0);
        SDVariable[] in = a.length > 1 ? new SDVariable[] {g, a[1]} : new SDVariable[] {g};
        return gradients(new RotaryOp(sameDiff, in, rope(), -direction(), length()).outputVariable());
    }
}
