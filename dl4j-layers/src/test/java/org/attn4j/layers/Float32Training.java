package org.attn4j.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;

/**
 * Training checks whose verdict holds for any correct float32 arithmetic (any BLAS kernel, any host): a float32
 * loss curve against the float64 curve of the same seeded network and data, and the least loss a model reaches
 * without moving information between steps, which a run must beat to show that its attention learned.
 */
final class Float32Training {

    /** Float32's machine epsilon, 2^-23: twice the largest relative error of one rounding. */
    static final double EPS32 = Math.ulp(1f);

    private Float32Training() {
    }

    /**
     * The relative distance allowed between the float32 and the float64 loss after {@code steps} steps of the same
     * training. A sum or dot product of m terms rounds to within about m EPS32 / 2 of its value (Higham, "Accuracy
     * and Stability of Numerical Algorithms", gamma_m), so a forward and backward pass whose longest chain of
     * reductions adds up to {@code roundings} terms gives a loss and gradients within about roundings * EPS32 / 2;
     * EPS32 instead of EPS32 / 2 leaves room for the element-wise operations between the reductions. Adam divides
     * each gradient by its own running size, so an update inherits the gradient's relative error, and while the
     * loss falls smoothly the errors of successive steps add rather than compound: after s steps
     * {@code (s + 1) * roundings * EPS32}. Once a curve turns erratic (loss spikes, Adam overshooting) the two
     * runs part exponentially; callers compare only steps before that.
     */
    static double tolerance(int roundings, int steps) {
        return (steps + 1) * (double) roundings * EPS32;
    }

    /**
     * Asserts that {@code float32[s]} equals {@code float64[s]} within {@link #tolerance}{@code (roundings, s)}
     * relative at every step {@code s} (NaN or infinity fails).
     */
    static void assertFollowsFloat64(double[] float64, double[] float32, int roundings, String what) {
        assertEquals(float64.length, float32.length, what + ": curve lengths");
        for (int s = 0; s < float64.length; s++) {
            double rel = Math.abs(float32[s] - float64[s]) / Math.abs(float64[s]);
            assertTrue(rel <= tolerance(roundings, s), what + ": step " + s + " float32 loss " + float32[s]
                    + " vs float64 " + float64[s] + " (relative " + rel + ", allowed " + tolerance(roundings, s)
                    + ")\n  float32 " + Arrays.toString(float32) + "\n  float64 " + Arrays.toString(float64));
        }
    }

    /**
     * Asserts that the last loss of {@code curve}, DL4J's score (summed over the {@code n} steps of a sequence,
     * averaged over the batch) of one-hot {@code data}, is below {@code n} times {@link #lossWithoutOtherSteps}: the
     * network learned what needs other steps.
     */
    static void assertLearnsBeyondOwnStep(double[] curve, DataSet data, int n, String what) {
        double floor = n * lossWithoutOtherSteps(data.getFeatures().argMax(1), data.getLabels().argMax(1));
        int last = curve.length - 1;
        assertTrue(curve[last] < floor, "after " + last + " steps the float64 loss " + curve[last]
                + " is not below " + floor + ", the least loss without looking at other steps: "
                + Arrays.toString(curve) + ", " + what);
    }

    /**
     * The least mean cross-entropy (nats per step) that any model reaches on these examples when the prediction at
     * each step depends on that step's token alone: the empirical conditional entropy H(label | token). In the
     * tests' networks only attention moves information between steps, so a loss below this means attention carries
     * what the task needs.
     *
     * @param tokens the input token at each step, any shape, integer values
     * @param labels the label at each step, the shape of {@code tokens}, integer values
     */
    static double lossWithoutOtherSteps(INDArray tokens, INDArray labels) {
        int[] x = tokens.reshape(tokens.length()).toIntVector();
        int[] y = labels.reshape(labels.length()).toIntVector();
        int vocab = Arrays.stream(x).max().orElse(0) + 1;
        int classes = Arrays.stream(y).max().orElse(0) + 1;
        double[][] count = new double[vocab][classes];
        double[] total = new double[vocab];
        for (int i = 0; i < x.length; i++) {
            count[x[i]][y[i]]++;
            total[x[i]]++;
        }
        double nats = 0;
        for (int i = 0; i < x.length; i++) {
            nats -= Math.log(count[x[i]][y[i]] / total[x[i]]);
        }
        return nats / x.length;
    }
}
