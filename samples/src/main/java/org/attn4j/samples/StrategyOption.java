package org.attn4j.samples;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;

/**
 * The value of a {@code --strategy ALGO} option: a sequence-parallel algorithm by name, or {@code zigzag} (ring on
 * the zigzag layout). Plain {@code ring} keeps its contiguous layout even for causal models.
 *
 * @param name   the name given, lower case
 * @param algo   the algorithm
 * @param layout the layout the name implies, or null for the algorithm's default
 */
public record StrategyOption(String name, SequenceAlgorithm algo, SequenceLayout layout) {

    /** {@code value} resolved, or one line naming the algorithms there are. */
    public static StrategyOption parse(String value) {
        String name = value.strip().toLowerCase(Locale.ROOT);
        if (name.equals("zigzag")) {
            return new StrategyOption(name, SequenceAlgorithm.byName("ring"), SequenceLayout.ZIGZAG);
        }
        try {
            SequenceAlgorithm algo = SequenceAlgorithm.byName(name);
            return new StrategyOption(name, algo, algo.name().equals("ring") ? SequenceLayout.CONTIGUOUS : null);
        } catch (IllegalArgumentException e) {
            throw new UserInputException("--strategy: " + e.getMessage() + ", zigzag");
        }
    }

    /** The names {@code --strategy} takes (picocli's completion candidates): every algorithm, and zigzag. */
    public static final class Names implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            List<String> names = new ArrayList<>(SequenceAlgorithm.all().stream().map(SequenceAlgorithm::name).toList());
            names.add(1, "zigzag");
            return names.iterator();
        }
    }
}
