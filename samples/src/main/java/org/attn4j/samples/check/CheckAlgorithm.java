package org.attn4j.samples.check;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;

import picocli.CommandLine;

/**
 * The algorithms {@code attn4j check --algo NAME} knows. Adding one is one constant here and one
 * {@link CheckableAlgorithm}.
 */
public enum CheckAlgorithm {

    /** Exact FlashAttention-2 on one device. */
    FLASH("flash", "exact FlashAttention-2 on one device", true, FlashCheck::new),

    /** Causal or non-causal linear attention with decay on one device (LASP's lightning form). */
    LINEAR("linear", "linear attention with decay on one device", false, LinearCheck::new);

    private final String cliName;
    private final String description;
    private final boolean softmax;
    private final Supplier<CheckableAlgorithm> factory;

    CheckAlgorithm(String cliName, String description, boolean softmax, Supplier<CheckableAlgorithm> factory) {
        this.cliName = cliName;
        this.description = description;
        this.softmax = softmax;
        this.factory = factory;
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

    /** A fresh instance for one check. */
    public CheckableAlgorithm create() {
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
