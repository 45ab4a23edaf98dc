package org.attn4j.samples.check;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;

import org.attn4j.distributed.sequence.SequenceAlgorithm;

import picocli.CommandLine;

/**
 * The algorithms {@code attn4j check --algo NAME} knows: the one-device ops, and every sequence-parallel algorithm
 * of {@link SequenceAlgorithm#all()}, which run over {@code --workers P} processes. Adding an op is one entry here
 * and one {@link CheckableAlgorithm}; a sequence-parallel algorithm comes with its descriptor.
 */
public final class CheckAlgorithm {

    /** Exact FlashAttention-2 on one device. */
    public static final CheckAlgorithm FLASH = new CheckAlgorithm("flash", "exact FlashAttention-2 on one device",
            true, FlashCheck::new, null);
    /** Causal or non-causal linear attention with decay on one device (LASP's lightning form). */
    public static final CheckAlgorithm LINEAR = new CheckAlgorithm("linear",
            "linear attention with decay on one device", false, LinearCheck::new, null);

    private final String cliName;
    private final String description;
    private final boolean softmax;
    private final Supplier<CheckableAlgorithm> factory;
    private final SequenceAlgorithm sequence;

    private CheckAlgorithm(String cliName, String description, boolean softmax, Supplier<CheckableAlgorithm> factory,
                           SequenceAlgorithm sequence) {
        this.cliName = cliName;
        this.description = description;
        this.softmax = softmax;
        this.factory = factory;
        this.sequence = sequence;
    }

    private static CheckAlgorithm of(SequenceAlgorithm a) {
        return new CheckAlgorithm(a.name(), a.description() + ", over P worker processes", a.softmax(), null, a);
    }

    /** The one-device ops, then the sequence-parallel algorithms in their listed order. */
    public static List<CheckAlgorithm> values() {
        List<CheckAlgorithm> all = new ArrayList<>(List.of(FLASH, LINEAR));
        SequenceAlgorithm.all().forEach(a -> all.add(of(a)));
        return all;
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
    public boolean equals(Object o) {
        return o instanceof CheckAlgorithm a && a.cliName.equals(cliName);
    }

    @Override
    public int hashCode() {
        return cliName.hashCode();
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
