package org.attn4j.ops.samediff;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.api.ops.DynamicCustomOp;
import org.nd4j.linalg.api.shape.LongShapeDescriptor;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Pins each ND4J 1.0.0-M2.1 behaviour that {@link JavaBackedOp} works around, so that an ND4J upgrade that changes
 * one fails here by name (then revisit the work-around) rather than somewhere inside an attention graph.
 */
class JavaBackedOpContractTest {

    /** out = 2 in, in Java, counting its calls. */
    static final class Doubler extends JavaBackedOp {
        static final AtomicInteger CALLS = new AtomicInteger();

        public Doubler() {
        }

        Doubler(SameDiff sd, SDVariable x) {
            super(sd, new SDVariable[] {x});
        }

        @Override
        public String opName() {
            return "attn4j_test_doubler";
        }

        @Override
        public int getNumOutputs() {
            return 2;
        }

        @Override
        protected List<LongShapeDescriptor> outputShapes(INDArray[] in) {
            return List.of(shapeOf(in[0], in[0].shape()), shapeOf(in[0], 1));
        }

        @Override
        protected List<DataType> outputTypes(List<DataType> in) {
            return List.of(in.get(0), in.get(0));
        }

        @Override
        protected void compute(INDArray[] in, INDArray[] out) {
            CALLS.incrementAndGet();
            out[0].assign(in[0].mul(2));
            out[1].assign(in[0].sumNumber());
        }

        @Override
        public List<SDVariable> doDiff(List<SDVariable> grads) {
            return gradients(new Doubler(sameDiff, grads.get(0)).outputVariables()[0]);
        }
    }

    /** {@link Unregistered} past work-around 3, so only its unknown name stands in SameDiff's way. */
    static final class UnregisteredWithProperties extends Unregistered {
        public UnregisteredWithProperties() {
        }

        UnregisteredWithProperties(SameDiff sd, SDVariable x) {
            super(sd, x);
        }

        @Override
        public Map<String, Object> propertiesForFunction() {
            return new java.util.LinkedHashMap<>();
        }
    }

    /** A custom op with a name neither libnd4j nor ImportClassMapping knows. */
    static class Unregistered extends DynamicCustomOp {
        public Unregistered() {
        }

        Unregistered(SameDiff sd, SDVariable x) {
            super(sd, new SDVariable[] {x});
        }

        @Override
        public String opName() {
            return "attn4j_test_unregistered";
        }

        @Override
        public int getNumOutputs() {
            return 1;
        }

        @Override
        public List<DataType> calculateOutputDataTypes(List<DataType> in) {
            return List.of(in.get(0));
        }
    }

    @Test
    void nativeNoopExistsToStandInForJavaOps() {
        assertNotNull(Nd4j.getExecutioner().getCustomOperations().get(JavaBackedOp.NATIVE_NOOP),
                "work-around 1 needs libnd4j's 'noop' op; this ND4J has none");
    }

    @Test
    void sameDiffRunsTheJavaForwardOncePerExecutionThroughShapeThenHash() {
        JavaBackedOp.register(new Doubler());
        SameDiff sd = SameDiff.create();
        INDArray x = Nd4j.createFromArray(1.0, 2.0, 3.0);
        SDVariable in = sd.var("x", x);
        SDVariable[] out = new Doubler(sd, in).outputVariables();
        int before = Doubler.CALLS.get();
        Map<String, INDArray> r = sd.output(Collections.emptyMap(), out[0].name(), out[1].name());
        assertEquals(before + 1, Doubler.CALLS.get(), "work-around 1: the Java forward did not run exactly once "
                + "(SameDiff no longer calls calculateOutputShape(OpContext) then opHash() per execution?)");
        assertEquals(x.mul(2), r.get(out[0].name()));
        assertEquals(6.0, r.get(out[1].name()).getDouble(0), 0.0);
    }

    @Test
    void gradientGraphsCopyOnlyRegisteredOpNames() {
        SameDiff sd = SameDiff.create();
        SDVariable x = sd.var("x", Nd4j.createFromArray(1.0, 2.0));
        new UnregisteredWithProperties(sd, x).outputVariable().sum().rename("loss").markAsLoss();
        Exception e = assertThrows(Exception.class, () -> sd.calculateGradients(Collections.emptyMap(), "x"),
                "work-around 2: M2.1 cannot copy an unregistered custom op into the gradient graph; now it can");
        assertTrue(String.valueOf(rootMessage(e)).contains("attn4j_test_unregistered")
                        || String.valueOf(rootMessage(e)).contains("No op known"),
                "unexpected failure: " + rootMessage(e));
    }

    @Test
    void opPropertiesComeFromNativeDescriptors() {
        SameDiff sd = SameDiff.create();
        Unregistered op = new Unregistered(sd, sd.var("x", Nd4j.createFromArray(1.0)));
        assertThrows(NullPointerException.class, op::propertiesForFunction,
                "work-around 3: DynamicCustomOp.propertiesForFunction() no longer needs a native descriptor");
    }

    @Test
    void noopChecksOutputShapesUnlessOverridden() {
        INDArray x = Nd4j.createFromArray(1.0, 2.0, 3.0);
        DynamicCustomOp op = DynamicCustomOp.builder(JavaBackedOp.NATIVE_NOOP).addInputs(x)
                .addOutputs(Nd4j.create(DataType.DOUBLE, 5)).build();
        assertThrows(RuntimeException.class, () -> Nd4j.exec(op),
                "work-around 1: noop no longer checks output shapes; the shapeFunctionOverride flag may go");
    }

    private static String rootMessage(Throwable t) {
        Throwable c = t;
        StringBuilder sb = new StringBuilder();
        while (c != null) {
            sb.append(c.getMessage()).append(" | ");
            c = c.getCause();
        }
        return sb.toString();
    }
}
