package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Sequence- and data-parallel training reproduces the single-process run: a small GPT-like network (two blocks),
 * 20 Adam steps, the loss curve equals {@code net.fit(batch)} in one process, float64 to 1e-6 relative, for every
 * attention strategy at every ZeRO stage (0 to 3), every strategy at each (DP, SP) = (1, 2), (1, 4), (2, 2), and
 * every ZeRO stage at each of those shapes: all pairs of the three factors, in 24 runs of the 72 combinations.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
public class DistributedTrainerParityTest {

    private static final int STEPS = 20;
    private static final int BATCH = 4;
    private static final int LENGTH = 16;
    /** The single-process curve of each strategy's network and data, computed once. */
    private static final Map<String, double[]> REFERENCE = new ConcurrentHashMap<>();

    /**
     * The strategies of the issue (ring, ring zigzag, WallFacer, ATTENTION2D, LASP with linear layers, Ulysses),
     * each at every ZeRO stage, on shape (i + j) mod 3 for strategy i and stage j: four consecutive stages take every
     * shape for each strategy, and six consecutive strategies every shape for each stage.
     */
    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        int[][] sizes = {{1, 2}, {1, 4}, {2, 2}};
        String[] strategies = {"ring", "ring-zigzag", "wallfacer", "attention2d", "lasp", "ulysses"};
        ZeroStage[] stages = ZeroStage.values();
        for (int i = 0; i < strategies.length; i++) {
            for (int j = 0; j < stages.length; j++) {
                int[] dpSp = sizes[(i + j) % sizes.length];
                a.add(Arguments.of(strategies[i], dpSp[0], dpSp[1], stages[j]));
            }
        }
        return a.stream();
    }

    @ParameterizedTest(name = "{0} DP={1} SP={2} {3}")
    @MethodSource("cases")
    void lossCurveEqualsTheSingleProcessRun(String name, int dp, int sp, ZeroStage zero) throws Exception {
        check(name, dp, sp, zero, DataType.DOUBLE, 1e-6);
    }

    static void check(String name, int dp, int sp, ZeroStage zero, DataType type, double tol) throws Exception {
        Nd4j.setDefaultDataTypes(type, type);
        boolean linear = name.equals("lasp");
        int kvHeads = name.equals("ulysses") ? TrainingFixtures.HEADS : TrainingFixtures.HEADS / 2;
        long seed = 42 + name.hashCode();
        List<DataSet> batches = TrainingFixtures.batches(type, STEPS, BATCH, LENGTH, seed);
        double[] expected = REFERENCE.computeIfAbsent(name + "/" + type,
                key -> singleProcess(type, linear, kvHeads, seed, batches));
        ParallelStrategy strategy = strategy(name, sp).withDataParallel(dp).withZero(zero);

        List<double[]> curves = TrainingFixtures.onWorkers(dp * sp, t -> {
            MultiLayerNetwork net = TrainingFixtures.gpt(type, linear, kvHeads, seed);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(strategy).build();
            double[] curve = new double[STEPS];
            for (int i = 0; i < STEPS; i++) {
                curve[i] = trainer.fit(batches.get(i));
            }
            return curve;
        });
        for (int r = 0; r < curves.size(); r++) {
            for (int i = 0; i < STEPS; i++) {
                double rel = Math.abs(curves.get(r)[i] - expected[i]) / Math.abs(expected[i]);
                assertTrue(rel <= tol, strategy + " rank " + r + " step " + i + ": " + curves.get(r)[i] + " vs "
                        + expected[i] + " (relative " + rel + ")\n  distributed " + Arrays.toString(curves.get(r))
                        + "\n  single      " + Arrays.toString(expected));
            }
        }
        assertEquals(dp * sp, curves.size());
        TrainingFixtures.assertLearned(expected, TrainingFixtures.gpt(type, linear, kvHeads, seed)
                .score(batches.get(STEPS - 1)), name + " in one process, " + type);
    }

    /** The scores {@code net.fit(batch)} reports, one process, whole batches. */
    public static double[] singleProcess(DataType type, boolean linear, int kvHeads, long seed, List<DataSet> batches) {
        MultiLayerNetwork net = TrainingFixtures.gpt(type, linear, kvHeads, seed);
        double[] curve = new double[batches.size()];
        for (int i = 0; i < batches.size(); i++) {
            net.fit(batches.get(i));
            curve[i] = net.score();
        }
        return curve;
    }

    static ParallelStrategy strategy(String name, int sp) {
        return switch (name) {
            case "ring" -> ParallelStrategy.sequence("ring", sp).withLayout(SequenceLayout.CONTIGUOUS);
            case "ring-zigzag" -> ParallelStrategy.sequence("ring", sp)
                    .withLayout(SequenceLayout.ZIGZAG);
            case "wallfacer" -> ParallelStrategy.sequence("wallfacer", sp).withOption("team", sp == 4 ? 2 : 1);
            case "attention2d" -> ParallelStrategy.sequence("attention2d", sp);
            case "lasp" -> ParallelStrategy.sequence("lasp", sp);
            case "ulysses" -> ParallelStrategy.sequence("ulysses", sp);   // Hkv = H: P must divide it
            default -> throw new IllegalArgumentException(name);
        };
    }
}
