package org.attn4j.samples.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * The median over a benchmark's rounds of each measurement's figures: measurements are matched across rounds by a
 * key, and each figure's median is taken over the rounds that have it (NaN, a figure not measured, is left out).
 */
final class RoundMedians {

    private RoundMedians() {
    }

    /**
     * @param rounds  each round's measurements
     * @param key     what identifies a measurement across rounds
     * @param figures a measurement's figures, in a fixed order
     * @param rebuild a measurement (the first round's) with the medians in place of its figures
     * @return one measurement per key, in the order keys first appear
     */
    static <T> List<T> of(List<List<T>> rounds, Function<T, Object> key, Function<T, double[]> figures,
                          BiFunction<T, double[], T> rebuild) {
        if (rounds.size() == 1) {
            return rounds.get(0);
        }
        Map<Object, List<T>> byKey = new LinkedHashMap<>();
        for (List<T> round : rounds) {
            for (T t : round) {
                byKey.computeIfAbsent(key.apply(t), k -> new ArrayList<>()).add(t);
            }
        }
        List<T> medians = new ArrayList<>();
        for (List<T> same : byKey.values()) {
            double[][] rows = same.stream().map(figures).toArray(double[][]::new);
            double[] m = new double[rows[0].length];
            for (int f = 0; f < m.length; f++) {
                int field = f;
                double[] v = Arrays.stream(rows).mapToDouble(r -> r[field]).filter(x -> !Double.isNaN(x)).toArray();
                m[f] = v.length == 0 ? Double.NaN : GemmRate.median(v);
            }
            medians.add(rebuild.apply(same.get(0), m));
        }
        return medians;
    }
}
