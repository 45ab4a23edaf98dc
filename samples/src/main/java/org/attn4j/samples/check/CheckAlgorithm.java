package org.attn4j.samples.check;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;

import org.attn4j.distributed.sequence.SequenceAlgorithm;

import picocli.CommandLine;

/**
 * The algorithms {@code attn4j check --algo NAME} knows: the one-device ops, and the sequence-parallel
 * algorithms, which run over {@code --workers P} processes. Adding an op is one constant here and one
 * {@link CheckableAlgorithm}; adding a sequence-parallel algorithm is one constant here and one in
 * {@link SequenceAlgorithm}.
 */
public enum CheckAlgorithm {

    /** Exact FlashAttention-2 on one device. */
    FLASH("flash", "exact FlashAttention-2 on one device", true, FlashCheck::new),

    /** Causal or non-causal linear attention with decay on one device (LASP's lightning form). */
    LINEAR("linear", "linear attention with decay on one device", false, LinearCheck::new),

    /** Ring attention (BurstAttention) over worker processes. */
    RING(SequenceAlgorithm.RING, "ring attention (BurstAttention) over P worker processes"),
    /** WallFacer multi-ring attention over worker processes. */
    WALLFACER(SequenceAlgorithm.WALLFACER, "WallFacer multi-ring attention over P worker processes (--team C)"),
    /** ATTENTION2D-NO over worker processes. */
    ATTENTION2D(SequenceAlgorithm.ATTENTION2D, "ATTENTION2D (non-overlapping) over P worker processes"),
    /** ATTENTION2D-O over worker processes. */
    ATTENTION2D_OVERLAP(SequenceAlgorithm.ATTENTION2D_OVERLAP,
            "ATTENTION2D with overlapped communication over P worker processes"),
    /** LASP (linear attention) over worker processes. */
    LASP(SequenceAlgorithm.LASP, "LASP linear attention over P worker processes"),
    /** DeepSpeed-Ulysses over worker processes. */
    ULYSSES(SequenceAlgorithm.ULYSSES, "Ulysses (all-to-all over heads) over P worker processes");

    private final String cliName;
    private final String description;
    private final boolean softmax;
    private final Supplier<CheckableAlgorithm> factory;
    private final SequenceAlgorithm sequence;

    CheckAlgorithm(String cliName, String description, boolean softmax, Supplier<CheckableAlgorithm> factory) {
        this.cliName = cliName;
        this.description = description;
        this.softmax = softmax;
        this.factory = factory;
        this.sequence = null;
    }

    CheckAlgorithm(SequenceAlgorithm sequence, String description) {
        this.cliName = sequence.cliName();
        this.description = description;
        this.softmax = sequence.softmax();
        this.factory = null;
        this.sequence = sequence;
    }

    /** The sequence-parallel algorithm this runs over worker processes, or null for a one-device op. */
    public SequenceAlgorithm sequence() {
        return sequence;
    }

    /**
     * Whether this is softmax attention: it takes {@code --scale} and {@code --window} and writes
     * {@code lse.npy}; linear attention takes {@code --decay} instead.
     */
    public boolean softmax() {
        return softmax;
    }

    /** The name given to {@code --algo}. */
    public String cliName() {
        return cliName;
    }

    /** One line for help texts. */
    public String description() {
        return description;
    }

    /**
     * A fresh instance for one check of a one-device op.
     *
     * @throws IllegalStateException for a sequence-parallel algorithm (see {@link DistributedCheck})
     */
    public CheckableAlgorithm create() {
        if (factory == null) {
            throw new IllegalStateException(cliName + " runs over worker processes");
        }
        return factory.get();
    }

    /**
     * The algorithm of a {@code --algo} name, ignoring case.
     *
     * @throws IllegalArgumentException naming the known algorithms if there is none of that name
     */
    public static CheckAlgorithm byName(String name) {
        for (CheckAlgorithm a : values()) {
            if (a.cliName.equalsIgnoreCase(name.strip())) {
                return a;
            }
        }
        throw new IllegalArgumentException("unknown algorithm '" + name + "'; expected one of " + names());
    }

    /** The known names, comma-separated. */
    public static String names() {
        List<String> names = new ArrayList<>();
        for (CheckAlgorithm a : values()) {
            names.add(a.cliName);
        }
        return String.join(", ", names);
    }

    @Override
    public String toString() {
        return cliName.toLowerCase(Locale.ROOT);
    }

    /** picocli converter: {@code --algo flash}. */
    static final class Converter implements CommandLine.ITypeConverter<CheckAlgorithm> {
        @Override
        public CheckAlgorithm convert(String value) {
            try {
                return byName(value);
            } catch (IllegalArgumentException e) {
                throw new CommandLine.TypeConversionException(e.getMessage());
            }
        }
    }

    /** picocli completion candidates and the {@code ${COMPLETION-CANDIDATES}} of the help text. */
    static final class Names implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            List<String> names = new ArrayList<>();
            for (CheckAlgorithm a : values()) {
                names.add(a.cliName);
            }
            return names.iterator();
        }
    }
}
