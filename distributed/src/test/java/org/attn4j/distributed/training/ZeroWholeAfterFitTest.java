package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.deeplearning4j.datasets.iterator.ExistingDataSetIterator;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.evaluation.classification.Evaluation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Every public {@code fit} of the trainer returns with the network whole at every ZeRO stage: right after
 * {@code fit(DataSet)}, {@code fitGroup} or {@code fit(iterator)}, DL4J's {@code output}, {@code ModelSerializer}
 * and evaluation see what a single process trained on the same batches has. Between the steps of an epoch stage 3
 * still keeps only its slice of the parameters resident.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ZeroWholeAfterFitTest {

    private static final int STEPS = 3;
    private static final int BATCH = 4;
    private static final int LENGTH = 16;
    private static final long SEED = 29;
    private static final int KV_HEADS = TrainingFixtures.HEADS / 2;
    /** Float64 sums in another order over 3 Adam steps: far below this; a released page reads 0, far above. */
    private static final double TOLERANCE = 1e-9;

    /** A public entry point of the trainer. */
    enum Fit { BATCH, GROUP, EPOCH }

    /** What one worker's network gives right after training. */
    private record Seen(INDArray output, INDArray restoredOutput, Evaluation evaluation) {
    }

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (ZeroStage z : ZeroStage.values()) {
            for (Fit f : Fit.values()) {
                a.add(Arguments.of(z, f));
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("cases")
    void outputSavedModelAndEvaluationEqualTheSingleProcessRunRightAfterFit(ZeroStage zero, Fit fit)
            throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, SEED);
        DataSet heldOut = TrainingFixtures.batches(DataType.DOUBLE, 1, BATCH, LENGTH, SEED + 1).get(0);
        MultiLayerNetwork reference = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
        INDArray untrained = reference.output(heldOut.getFeatures());
        for (DataSet b : batches) {
            reference.fit(b);
        }
        INDArray expected = reference.output(heldOut.getFeatures());
        Evaluation expectedEval = reference.evaluate(new ExistingDataSetIterator(List.of(heldOut)));
        assertTrue(distance(untrained, expected) > 1e3 * TOLERANCE, "training moves the outputs");

        ParallelStrategy strategy = ParallelStrategy.sequence("ring", 2).withDataParallel(2).withZero(zero);
        List<Seen> seen = TrainingFixtures.onWorkers(4, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(strategy).build();
            switch (fit) {
                case BATCH -> batches.forEach(trainer::fit);
                case GROUP -> batches.forEach(b -> trainer.fitGroup(groupExamples(b, trainer.dataParallelIndex())));
                case EPOCH -> trainer.fit(new ExistingDataSetIterator(batches));
                default -> throw new IllegalArgumentException(fit.name());
            }
            INDArray output = net.output(heldOut.getFeatures());
            MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(
                    new ByteArrayInputStream(serialized(net)), false);
            return new Seen(output, restored.output(heldOut.getFeatures()),
                    net.evaluate(new ExistingDataSetIterator(List.of(heldOut))));
        });

        for (int r = 0; r < seen.size(); r++) {
            Seen s = seen.get(r);
            String where = zero + " " + fit + " rank " + r;
            assertTrue(distance(s.output(), expected) <= TOLERANCE, where + ": output after fit differs from the "
                    + "single-process run's by " + distance(s.output(), expected));
            assertEquals(s.output(), s.restoredOutput(), where + ": the saved and restored model's output");
            assertEquals(expectedEval.accuracy(), s.evaluation().accuracy(), 0.0, where + ": accuracy");
            assertEquals(expectedEval.confusionMatrix(), s.evaluation().confusionMatrix(), where + ": confusion");
        }
    }

    @Test
    void anEpochThatRefusesABatchStillLeavesTheNetworkWholeAtStage3() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, SEED);
        DataSet odd = TrainingFixtures.batches(DataType.DOUBLE, 1, BATCH - 1, LENGTH, SEED + 2).get(0);
        DataSet heldOut = TrainingFixtures.batches(DataType.DOUBLE, 1, BATCH, LENGTH, SEED + 1).get(0);
        MultiLayerNetwork reference = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
        for (DataSet b : batches) {
            reference.fit(b);
        }
        INDArray expected = reference.output(heldOut.getFeatures());
        List<DataSet> epoch = new ArrayList<>(batches);
        epoch.add(odd);                            // 3 examples over 2 data-parallel groups: refused

        ParallelStrategy strategy = ParallelStrategy.sequence("ring", 2).withDataParallel(2)
                .withZero(ZeroStage.PARAMETERS);
        List<INDArray> outputs = TrainingFixtures.onWorkers(4, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(strategy).build();
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> trainer.fit(new ExistingDataSetIterator(epoch)));
            assertTrue(e.getMessage().contains("batch of 3 examples"), e.getMessage());
            return net.output(heldOut.getFeatures());
        });
        for (int r = 0; r < outputs.size(); r++) {
            assertTrue(distance(outputs.get(r), expected) <= TOLERANCE, "rank " + r + ": output after the refusal "
                    + "differs from the single-process run's by " + distance(outputs.get(r), expected));
        }
    }

    @Test
    void stepsOfFitDataSetMoveAsManyBytesAsTheStepsOfAnEpochAtStage3() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, SEED);
        ParallelStrategy strategy = ParallelStrategy.sequence("ring", 2).withDataParallel(2)
                .withZero(ZeroStage.PARAMETERS);
        long[] bytes = new long[2];
        for (Fit fit : new Fit[] {Fit.BATCH, Fit.EPOCH}) {
            List<Long> sent = TrainingFixtures.onWorkers(4, t -> {
                MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
                DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(strategy).build();
                long before = t.traffic().total();
                if (fit == Fit.BATCH) {
                    batches.forEach(trainer::fit);
                } else {
                    trainer.fit(new ExistingDataSetIterator(batches));
                }
                return t.traffic().total() - before;
            });
            bytes[fit == Fit.BATCH ? 0 : 1] = sent.stream().mapToLong(Long::longValue).sum();
        }
        // Whole after each fit(DataSet): gathered at its end, used in place by the next step's forward pass.
        assertTrue(bytes[0] > 0);
        assertEquals(bytes[1], bytes[0], "bytes all workers sent: " + STEPS + " x fit(DataSet) " + bytes[0]
                + ", fit(iterator) over the same batches " + bytes[1]);
    }

    @Test
    void betweenTheStepsOfAnEpochStage3KeepsOnlyItsSliceResident() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, STEPS, BATCH, LENGTH, SEED);
        MultiLayerNetwork reference = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
        batches.forEach(reference::fit);
        ParallelStrategy strategy = ParallelStrategy.sequence("ring", 4).withZero(ZeroStage.PARAMETERS);
        List<long[]> seen = TrainingFixtures.onWorkers(4, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, false, KV_HEADS, SEED);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(strategy).build();
            long[] zerosAndPages = new long[2];
            // the data source runs between the steps: read the parameters there, after the first step
            trainer.fit(new ExistingDataSetIterator(batches) {
                private int served;

                @Override
                public DataSet next() {
                    if (served++ == 1) {
                        zerosAndPages[0] = zerosOutsideSlice(net.params(), t.rank(), t.worldSize());
                        zerosAndPages[1] = wholePagesOutsideSlice(net.params(), t.rank(), t.worldSize());
                    }
                    return super.next();
                }
            });
            double after = distance(net.params(), reference.params());
            assertTrue(after <= TOLERANCE, "rank " + t.rank() + ": after the epoch the parameters are the "
                    + "single-process run's, off by " + after);
            return zerosAndPages;
        });
        assumeTrue(seen.get(0)[1] > 0, "pages of " + ResidentPages.pageBytes() + " bytes: none lies wholly outside "
                + "a slice of this small network");
        for (int r = 0; r < seen.size(); r++) {
            long[] s = seen.get(r);
            assertTrue(s[0] >= s[1] * ResidentPages.pageBytes() / Double.BYTES, "rank " + r + ": between steps the "
                    + s[1] + " whole pages of parameters it does not own are released and read 0; " + s[0]
                    + " parameters outside its slice do");
        }
    }

    /** Exact zeros of {@code params} outside rank {@code r}'s slice of W. */
    private static long zerosOutsideSlice(INDArray params, int r, int w) {
        double[] p = params.reshape(params.length()).toDoubleVector();
        long from = r * (long) p.length / w;
        long to = (r + 1) * (long) p.length / w;
        long n = 0;
        for (int i = 0; i < p.length; i++) {
            if ((i < from || i >= to) && p[i] == 0.0) {
                n++;
            }
        }
        return n;
    }

    /** The memory pages of float64 {@code params} lying wholly before or wholly after rank {@code r}'s slice. */
    private static long wholePagesOutsideSlice(INDArray params, int r, int w) {
        long base = params.data().addressPointer().address();
        long from = base + r * params.length() / w * Double.BYTES;
        long to = base + (r + 1) * params.length() / w * Double.BYTES;
        long end = base + params.length() * Double.BYTES;
        return wholePages(base, from) + wholePages(to, end);
    }

    private static long wholePages(long fromAddress, long toAddress) {
        long page = ResidentPages.pageBytes();
        return Math.max(0, Math.floorDiv(toAddress, page) - Math.floorDiv(fromAddress + page - 1, page));
    }

    /** Examples {@code [g B/2, (g+1) B/2)} of a batch: what data-parallel group {@code g} of 2 passes. */
    private static DataSet groupExamples(DataSet whole, int g) {
        int half = BATCH / 2;
        return new DataSet(whole.getFeatures().get(NDArrayIndex.interval(g * half, (g + 1) * half)).dup(),
                whole.getLabels().get(NDArrayIndex.interval(g * half, (g + 1) * half)).dup());
    }

    private static byte[] serialized(MultiLayerNetwork net) throws java.io.IOException {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ModelSerializer.writeModel(net, out, true);
        return out.toByteArray();
    }

    /** Largest absolute difference over the largest absolute value of {@code expected}. */
    private static double distance(INDArray actual, INDArray expected) {
        return actual.sub(expected).amaxNumber().doubleValue() / expected.amaxNumber().doubleValue();
    }
}
