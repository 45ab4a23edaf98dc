package org.attn4j.distributed.plan;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;

import org.attn4j.distributed.sequence.SequenceAlgorithm;

/**
 * Prices every algorithm's candidates on a problem's cluster and names the fastest (forward plus backward):
 * WallFacer's topology scheduler (section 3.4, equation 8) generalised from its own C and placement to all
 * the algorithms, with the alpha-beta model of {@link Network} in place of profiling. Each algorithm is reported
 * with its fastest configuration, except where the model pins the one attn4j runs by default
 * ({@link AlgorithmModel#reportsFastest}: ATTENTION2D's grid), whose note then names a faster one.
 */
public final class Planner {

    /**
     * The cost models of every listed algorithm ({@link SequenceAlgorithm#all()}), in its order; an option given
     * (e.g. WallFacer's {@code team}) is priced alone, a missing one is searched where the model searches it.
     */
    static List<AlgorithmModel> models(Map<String, Double> options) {
        return SequenceAlgorithm.all().stream().map(a -> a.costModel(options)).toList();
    }

    private Planner() {
    }

    /**
     * Every algorithm's prediction and the fastest.
     *
     * @param problem the problem
     * @param fastest the available prediction with the least forward+backward time
     * @param all     one prediction per algorithm, in report order
     */
    public record Plan(PlanProblem problem, Prediction fastest, List<Prediction> all) {

        /** The prediction of an algorithm by name. */
        public Prediction get(String algorithm) {
            return all.stream().filter(p -> p.algorithm().equals(algorithm)).findFirst()
                    .orElseThrow(() -> new IllegalArgumentException("Planner: no algorithm '" + algorithm + "'"));
        }

        /** Ring attention's forward+backward time over this prediction's; NaN when either is unavailable. */
        public double speedupOverRing(Prediction p) {
            Prediction ring = get("ring");
            return ring.available() && p.available() ? ring.totalSeconds() / p.totalSeconds() : Double.NaN;
        }
    }

    /** Plans a problem with every algorithm's options at their defaults or searched. */
    public static Plan plan(PlanProblem problem) {
        return plan(problem, Map.of());
    }

    /**
     * Plans a problem.
     *
     * @param options algorithm options to price as given (e.g. {@code team}); the others are searched
     */
    public static Plan plan(PlanProblem problem, Map<String, Double> options) {
        Network network = new Network(problem.cluster());
        List<Prediction> all = new ArrayList<>();
        for (AlgorithmModel m : models(options)) {
            all.add(predict(m, problem, network));
        }
        Prediction fastest = all.stream().filter(Prediction::available)
                .min(Comparator.comparingDouble(Prediction::totalSeconds)).orElseThrow();
        return new Plan(problem, fastest, List.copyOf(all));
    }

    private static Prediction predict(AlgorithmModel m, PlanProblem problem, Network network) {
        if (m.linearAttention() != problem.linear()) {
            return Prediction.unavailable(m, m.linearAttention()
                    ? "linear attention; plan it with --attention linear"
                    : "softmax attention; --attention linear plans LASP only");
        }
        String reason = m.unavailable(problem);
        if (reason != null) {
            return Prediction.unavailable(m, reason);
        }
        List<Prediction> priced = new ArrayList<>();
        for (AlgorithmModel.Candidate c : m.candidates(problem)) {
            priced.add(Prediction.of(m, c, problem, network));
        }
        Prediction shown = m.reportsFastest() ? priced.stream()
                .min(Comparator.comparingDouble(Prediction::totalSeconds)).orElseThrow() : priced.get(0);
        List<Prediction> others = new ArrayList<>(priced.stream().filter(p -> p != shown).toList());
        others.sort(Comparator.comparingDouble(Prediction::totalSeconds));
        Prediction noted = shown;
        Prediction faster = others.isEmpty() ? null : others.get(0);
        if (faster != null && faster.totalSeconds() < shown.totalSeconds()) {
            noted = shown.withNote("the " + faster.config() + " is faster, " + Prediction.milliseconds(faster.totalSeconds())
                    + " ms forward+backward" + (faster.note() == null ? "" : ": " + faster.note()));
        }
        return noted.withAlternatives(others);
    }
}
