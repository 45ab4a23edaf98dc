package org.attn4j.ops.samediff;

import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;

/**
 * One worker's {@link SequenceParallelAttention} as a SameDiff op: inputs this worker's shards of q, k, v; output its
 * rows of O. Every worker of the group builds the same graph and runs it in step, as with the algorithms
 * themselves. The algorithm (with its transport) is not data and cannot travel in a saved graph, so the op holds a
 * binding key (string argument) into a process-wide table; {@link SDAttention#bind} attaches an algorithm to the
 * keys of a graph (after {@code SameDiff.load}, or to swap the transport). The forward pass keeps the algorithm's
 * {@link SequenceParallelAttention.Pass} for the gradient op {@link SequenceParallelGradOp}, which checks that it
 * belongs to the output it is given.
 */
public final class SequenceParallelOp extends JavaBackedOp {

    static final String NAME = "attn4j_sequence_parallel_attention";

    private static final Map<String, Binding> BINDINGS = new ConcurrentHashMap<>();

    /** For SameDiff's copies ({@link JavaBackedOp}, work-around 2). */
    public SequenceParallelOp() {
    }

    SequenceParallelOp(SameDiff sd, SDVariable[] inputs, String key, double scale) {
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
        return 1;
    }

    /** The binding key this op's algorithm is found under. */
    String key() {
        return getSArgument(0);
    }

    static void bind(String key, SequenceParallelAttention<?> algorithm) {
        BINDINGS.put(key, new Binding(algorithm));
    }

    static Binding binding(String key) {
        Binding b = BINDINGS.get(key);
        if (b == null) {
            throw new IllegalStateException("SDAttention.sequenceParallel: no algorithm is bound to key '" + key
                    + "' in this process; after SameDiff.load call SDAttention.bind(sameDiff, algorithm)");
        }
        return b;
    }

    @Override
    protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
        FlashAttentionOp.requireInputs(in, 3, 3);
        if (in[0].rank() != 4) {
            throw new IllegalArgumentException("SDAttention.sequenceParallel: q must be [B, H, N/P, D], got "
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
        Binding b = binding(key());
        b.forward(in[0], in[1], in[2], getTArgument(0));
        out[0].assign(b.lastOutput());
    }

    @Override
    public List<SDVariable> doDiff(List<SDVariable> grads) {
        SDVariable[] a = args();
        SDVariable[] gin = {a[0], a[1], a[2], outputVariable(), gradientOf(grads, 0)};
        SDVariable[] d = new SequenceParallelGradOp(sameDiff, gin, key(), getTArgument(0)).outputVariables();
        return gradients(d);
    }

    /** An algorithm and the pass of its latest forward call. */
    static final class Binding {
        private final SequenceParallelAttention<?> algorithm;
        private SequenceParallelAttention.Pass pass;

        Binding(SequenceParallelAttention<?> algorithm) {
            this.algorithm = algorithm;
        }

        synchronized void forward(INDArray q, INDArray k, INDArray v, double scale) {
            pass = algorithm.forward(q, k, v, scaleFor(scale, q));
        }

        /** The stored scale, or the algorithm's default (0 stored). */
        private double scaleFor(double stored, INDArray q) {
            return stored != 0.0 ? stored : algorithm.defaultScale(q.size(3));
        }

        synchronized INDArray lastOutput() {
            return pass.output();
        }

        /** The backward pass of the latest forward pass, which must have produced {@code o}. */
        synchronized AttentionGradients backward(INDArray q, INDArray k, INDArray v, INDArray o, INDArray dO,
                                                 double scale) {
            if (pass == null || !Arrays.equals(pass.output().shape(), o.shape())
                    || !pass.output().equals(o)) {
                throw new IllegalStateException("SDAttention.sequenceParallel: the gradient op found no forward pass "
                        + "for this output in this process (every worker must run the forward and backward passes of "
                        + "the same graph in step)");
            }
            AttentionGradients g = backwardOf(algorithm, q, k, v, pass, dO, scaleFor(scale, q));
            pass = null;
            return g;
        }

        @SuppressWarnings("unchecked")
        private static <F extends SequenceParallelAttention.Pass> AttentionGradients backwardOf(
                SequenceParallelAttention<F> algorithm, INDArray q, INDArray k, INDArray v,
                SequenceParallelAttention.Pass pass, INDArray dO, double scale) {
            return algorithm.backward(q, k, v, (F) pass, dO, scale);
        }
    }
}
