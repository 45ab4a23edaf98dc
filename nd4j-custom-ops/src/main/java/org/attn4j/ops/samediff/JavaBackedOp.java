package org.attn4j.ops.samediff;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.imports.converters.ImportClassMapping;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.CustomOpDescriptor;
import org.nd4j.linalg.api.ops.DynamicCustomOp;
import org.nd4j.linalg.api.ops.OpContext;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A SameDiff op whose forward pass is Java code. Every work-around this project needs for SameDiff in
 * ND4J 1.0.0-M2.1 lives in this class, each with the upstream behaviour it compensates;
 * {@code JavaBackedOpContractTest} pins each of those behaviours so that an ND4J upgrade that changes one fails
 * loudly instead of computing something else.
 *
 * <ol>
 *   <li><b>No Java forward.</b> SameDiff executes a {@code DynamicCustomOp} by handing its {@link #opHash()} to the
 *   native executioner; there is no Java hook. But SameDiff first asks the op for its output shapes through
 *   {@link #calculateOutputShape(OpContext)} with that context's input arrays set, allocates the outputs into
 *   the same context, and then calls {@link #opHash()} immediately before the native call
 *   ({@code InferenceSession.getAndParameterizeOp}, {@code NativeOpExecutioner.exec(CustomOp, OpContext)}). So
 *   this class remembers the context (per thread), runs {@link #compute} inside {@code opHash()}, and returns the
 *   hash of libnd4j's {@code noop}, which takes any inputs and outputs and touches none. The context is marked
 *   {@code shapeFunctionOverride}, else libnd4j rejects outputs whose shapes differ from the inputs' ("Output
 *   array did not match expected shape").</li>
 *   <li><b>Ops are copied through FlatBuffers.</b> Building the gradient graph ({@code SameDiff.createGradFunction},
 *   via {@code FlatBuffersMapper.cloneViaSerialize}), {@code dup()} and {@code save/load} recreate every op from
 *   its name, and a name unknown to {@code ImportClassMapping.getOpNameMapping()} fails ("No op known for hash"),
 *   while a hash of a stock op would turn it back into the stock class. So each subclass registers its name
 *   there ({@link #register}), and its settings travel only in the integer, float, boolean and string
 *   arguments, which FlatBuffers keeps.</li>
 *   <li><b>Properties come from libnd4j's op descriptors.</b> {@code DynamicCustomOp.propertiesForFunction()}
 *   looks the op name up in the native descriptor list and throws a {@code NullPointerException} for a name not
 *   in it; these ops have no properties beyond their arguments, so both directions are empty here.</li>
 * </ol>
 *
 * <p>{@code ExternalErrorsFunction} (gradients injected from outside the graph) is not used: in M2.1 it delivers
 * twice the injected gradient. Gradients here are ordinary ops returned by {@link #doDiff}, which SameDiff uses
 * as given (checked against finite differences in the tests).
 */
public abstract class JavaBackedOp extends DynamicCustomOp {

    /** libnd4j's op that accepts any number of inputs and outputs and writes nothing. */
    static final String NATIVE_NOOP = "noop";

    private final transient ThreadLocal<OpContext> pending = new ThreadLocal<>();

    /** For the FlatBuffers copy (work-around 2): SameDiff creates ops through the no-argument constructor. */
    protected JavaBackedOp() {
    }

    protected JavaBackedOp(SameDiff sd, SDVariable[] inputs) {
        super(null, sd, inputs);
    }

    /**
     * Adds an op to the names SameDiff can recreate (work-around 2). Idempotent; the functions in {@link SDAttention}
     * call it before building, and it must run before {@code SameDiff.load} of a graph holding the op
     * ({@link SDAttention#registerOps()}).
     */
    static void register(JavaBackedOp prototype) {
        ImportClassMapping.getOpNameMapping().putIfAbsent(prototype.opName(), prototype);
    }

    /** The op's output shapes and types for these input arrays; validates the inputs. */
    protected abstract List<LongShapeDescriptor> outputShapes(INDArray[] inputs);

    /** The op's output types for these input types. */
    protected abstract List<DataType> outputTypes(List<DataType> inputTypes);

    /** Writes the op's outputs for these inputs into {@code outputs}, allocated with {@link #outputShapes}. */
    protected abstract void compute(INDArray[] inputs, INDArray[] outputs);

    @Override
    public abstract int getNumOutputs();

    @Override
    public final List<LongShapeDescriptor> calculateOutputShape(OpContext oc) {
        INDArray[] in = oc.getInputArrays().toArray(new INDArray[0]);
        List<LongShapeDescriptor> shapes = outputShapes(in);
        // Work-around 1 (cont.): libnd4j checks the outputs against noop's shape function (the input shapes)
        // unless the context says the shapes were computed elsewhere.
        oc.shapeFunctionOverride(true);
        pending.set(oc);
        return shapes;
    }

    @Override
    public final List<LongShapeDescriptor> calculateOutputShape() {
        INDArray[] in = inputArguments().toArray(new INDArray[0]);
        if (in.length == 0 || java.util.Arrays.asList(in).contains(null)) {
            return Collections.emptyList();
        }
        return outputShapes(in);
    }

    @Override
    public final List<DataType> calculateOutputDataTypes(List<DataType> dataTypes) {
        return outputTypes(dataTypes);
    }

    /** Runs the Java forward pass for the context SameDiff is about to execute (work-around 1). */
    @Override
    public final long opHash() {
        OpContext oc = pending.get();
        if (oc != null && oc.getOutputArrays().size() == getNumOutputs()) {
            pending.remove();
            compute(oc.getInputArrays().toArray(new INDArray[0]), oc.getOutputArrays().toArray(new INDArray[0]));
        }
        CustomOpDescriptor noop = Nd4j.getExecutioner().getCustomOperations().get(NATIVE_NOOP);
        if (noop == null) {
            throw new IllegalStateException(opName() + ": libnd4j has no '" + NATIVE_NOOP + "' op to stand in for "
                    + "the Java forward pass; this ND4J version is not supported (built for 1.0.0-M2.1)");
        }
        return noop.getHash();
    }

    /**
     * Runs the op outside SameDiff: allocates the outputs and computes them. For the gradient ops' own use and
     * for tests.
     */
    public final INDArray[] execute(INDArray... inputs) {
        List<LongShapeDescriptor> shapes = outputShapes(inputs);
        INDArray[] out = new INDArray[shapes.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = Nd4j.create(shapes.get(i), false);
        }
        compute(inputs, out);
        return out;
    }

    /** Work-around 3: no native descriptor to read properties from; settings travel as op arguments. */
    @Override
    public final Map<String, Object> propertiesForFunction() {
        return new LinkedHashMap<>();
    }

    @Override
    public final void setPropertiesForFunction(Map<String, Object> properties) {
        // Nothing: every setting is an op argument (see propertiesForFunction).
    }

    /** The gradient list SameDiff expects: one entry per input, zeros for inputs that get no gradient. */
    protected final List<SDVariable> gradients(SDVariable... perInput) {
        SDVariable[] args = args();
        List<SDVariable> out = new ArrayList<>(args.length);
        for (int i = 0; i < args.length; i++) {
            out.add(i < perInput.length && perInput[i] != null ? perInput[i] : sameDiff.zerosLike(args[i]));
        }
        return out;
    }

    /** The incoming gradient of output {@code i}, or zeros when SameDiff passes none. */
    protected final SDVariable gradientOf(List<SDVariable> grads, int i) {
        SDVariable g = i < grads.size() ? grads.get(i) : null;
        return g != null ? g : sameDiff.zerosLike(outputVariables()[i]);
    }

    /**
     * No gradient: the gradient ops ({@code *GradOp}) are not differentiated again. The forward ops override this.
     *
     * @throws UnsupportedOperationException naming the op
     */
    @Override
    public List<SDVariable> doDiff(List<SDVariable> grads) {
        throw new UnsupportedOperationException(opName() + ": second derivatives are not available; attn4j's "
                + "SameDiff functions differentiate once");
    }

    /** The shapes and types of the first {@code count} inputs, as output shapes (a gradient op's dQ, dK, dV ...). */
    protected static List<LongShapeDescriptor> shapesOf(INDArray[] in, int count) {
        List<LongShapeDescriptor> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            out.add(shapeOf(in[i], in[i].shape()));
        }
        return out;
    }

    /** Shape descriptor in the type of {@code like}. */
    protected static LongShapeDescriptor shapeOf(INDArray like, long... shape) {
        return LongShapeDescriptor.fromShape(shape, like.dataType());
    }
}
