package org.attn4j.distributed.sequence;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;

import org.attn4j.distributed.testing.Ranks;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** What the sequence-parallel tests share: running a body on P in-JVM ranks, seeded inputs, relative errors. */
final class SequenceTesting {

    private SequenceTesting() {
    }

    /**
     * Runs {@code body} on every rank of an in-JVM group of {@code p} at once ({@link Ranks}; 20 s transport timeout,
     * 60 s for every rank to finish); each body returns its results in a fixed order.
     *
     * @return {@code parts[i][rank]}: result {@code i} of each rank (null if the body returned null)
     * @throws java.util.concurrent.ExecutionException the first rank's failure
     */
    static INDArray[][] onRanks(int p, Ranks.Body<INDArray[]> body) throws Exception {
        List<INDArray[]> results = Ranks.runInJvm(p, Duration.ofSeconds(20), Duration.ofSeconds(60), body);
        INDArray[][] parts = null;
        for (int r = 0; r < p; r++) {
            INDArray[] res = results.get(r);
            if (res == null) {
                continue;
            }
            if (parts == null) {
                parts = new INDArray[res.length][p];
            }
            for (int i = 0; i < res.length; i++) {
                parts[i][r] = res[i];
            }
        }
        return parts;
    }

    /** Every listed sequence-parallel algorithm, for parameterized tests. */
    static java.util.stream.Stream<SequenceAlgorithm> algorithms() {
        return SequenceAlgorithm.all().stream();
    }

    /** Every listed softmax algorithm, for parameterized tests. */
    static java.util.stream.Stream<SequenceAlgorithm> softmaxAlgorithms() {
        return algorithms().filter(SequenceAlgorithm::softmax);
    }

    /** A seeded Gaussian array of the given type. */
    static INDArray randn(long seed, DataType type, long... shape) {
        return Nd4j.getRandomFactory().getNewRandomInstance(seed).nextGaussian(shape).castTo(type);
    }

    /** max |actual - expected| / max |expected| within {@code tol}; equal infinities (LSE of empty rows) pass. */
    static void assertClose(String what, INDArray actual, INDArray expected, double tol, String ctx) {
        double[] a = actual.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        double[] e = expected.castTo(DataType.DOUBLE).dup('c').data().asDouble();
        if (a.length != e.length) {
            fail(what + ": " + a.length + " values, expected " + e.length + " (" + ctx + ")");
        }
        double diff = 0;
        double ref = 0;
        for (int i = 0; i < e.length; i++) {
            if (Double.isInfinite(e[i]) && a[i] == e[i]) {
                continue;
            }
            diff = Math.max(diff, Math.abs(a[i] - e[i]));
            ref = Math.max(ref, Math.abs(e[i]));
        }
        double err = ref == 0 ? diff : diff / ref;
        if (!(err <= tol)) {
            fail(what + ": relative error " + err + " > " + tol + " (" + ctx + ")");
        }
    }
}
