package org.attn4j.distributed.plan;

import java.util.List;

/**
 * What the model predicts for one algorithm on one problem, summed over the layers: the best configuration
 * found, or why the algorithm does not apply. Bytes and messages are those of the busiest rank.
 *
 * @param algorithm        the algorithm's name
 * @param source           the paper and section its schedule follows
 * @param config           the configuration priced (the fastest candidate, or the default one where
 *                         {@link AlgorithmModel#reportsFastest} says so), null if unavailable
 * @param note             a caveat (a placement attn4j does not use, a faster configuration), or null
 * @param unavailable      why the algorithm cannot run this problem, or null
 * @param forwardBytes     bytes sent by the busiest rank in the forward passes
 * @param backwardBytes    bytes sent by the busiest rank in the backward passes
 * @param interNodeBytes   of those (forward and backward), the bytes that cross between nodes, busiest rank
 * @param forwardMessages  messages sent by the busiest rank in the forward passes (each pays a latency)
 * @param backwardMessages messages sent by the busiest rank in the backward passes
 * @param computeSeconds   local compute on the critical path, forward and backward
 * @param forwardSeconds   predicted time of the forward passes
 * @param totalSeconds     predicted time of the forward and backward passes
 * @param alternatives     the other candidates priced, slowest last (empty when there was one)
 */
public record Prediction(String algorithm, String source, String config, String note, String unavailable,
                         long forwardBytes, long backwardBytes, long interNodeBytes, long forwardMessages,
                         long backwardMessages, double computeSeconds, double forwardSeconds, double totalSeconds,
                         List<Prediction> alternatives) {

    /** Whether the algorithm applies (then every number is set). */
    public boolean available() {
        return unavailable == null;
    }

    /** An algorithm that cannot run the problem. */
    static Prediction unavailable(AlgorithmModel model, String reason) {
        return new Prediction(model.name(), model.source(), null, null, reason, 0, 0, 0, 0, 0, Double.NaN,
                Double.NaN, Double.NaN, List.of());
    }

    /** Prices one candidate on the network, over the problem's layers. */
    static Prediction of(AlgorithmModel model, AlgorithmModel.Candidate c, PlanProblem problem, Network network) {
        int layers = problem.layers();
        double forward = c.forward().seconds(network);
        double backward = c.backward().seconds(network);
        long[] fwd = c.forward().bytesSent();
        long[] bwd = c.backward().bytesSent();
        long[] inter = c.forward().interNodeBytes(problem.cluster());
        long[] interBwd = c.backward().interNodeBytes(problem.cluster());
        long interMax = 0;
        for (int r = 0; r < inter.length; r++) {
            interMax = Math.max(interMax, inter[r] + interBwd[r]);
        }
        return new Prediction(model.name(), model.source(), c.config(), c.note(), null, layers * max(fwd),
                layers * max(bwd), layers * interMax, layers * max(c.forward().messagesSent()),
                layers * max(c.backward().messagesSent()),
                layers * (c.forward().computeSeconds() + c.backward().computeSeconds()), layers * forward,
                layers * (forward + backward), List.of());
    }

    /** This prediction with the other candidates attached. */
    Prediction withAlternatives(List<Prediction> others) {
        return new Prediction(algorithm, source, config, note, unavailable, forwardBytes, backwardBytes,
                interNodeBytes, forwardMessages, backwardMessages, computeSeconds, forwardSeconds, totalSeconds,
                List.copyOf(others));
    }

    /** This prediction with {@code more} added to its note. */
    Prediction withNote(String more) {
        return new Prediction(algorithm, source, config, note == null ? more : note + "; " + more, unavailable,
                forwardBytes, backwardBytes, interNodeBytes, forwardMessages, backwardMessages, computeSeconds,
                forwardSeconds, totalSeconds, alternatives);
    }

    private static long max(long[] values) {
        long m = 0;
        for (long v : values) {
            m = Math.max(m, v);
        }
        return m;
    }

    /** Milliseconds with as many decimals as the size calls for: "1234", "123.4", "12.34", "0.1234". */
    public static String milliseconds(double seconds) {
        double ms = seconds * 1e3;
        String f = ms >= 1000 ? "%.0f" : ms >= 100 ? "%.1f" : ms >= 1 ? "%.2f" : "%.4f";
        return String.format(java.util.Locale.ROOT, f, ms);
    }
}
