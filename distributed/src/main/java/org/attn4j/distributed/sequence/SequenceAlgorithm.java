package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.stream.Collectors;

import org.attn4j.distributed.collective.Channels;
import org.attn4j.distributed.plan.AlgorithmModel;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;

/**
 * A sequence-parallel algorithm, described: its name and paper, the settings it accepts and how they are checked,
 * its default layout, how a worker's instance is built (with the collective channels it takes), the bytes each
 * rank sends, and its cost model. Everything that lists algorithms ({@code attn4j check --algo},
 * {@code train --strategy}, {@code plan}, {@code bench distributed}, the trainer) reads {@link #all()}, so an
 * algorithm is added by writing its class and its descriptor and naming the descriptor in
 * {@code META-INF/services/org.attn4j.distributed.sequence.SequenceAlgorithm} (the order there is the order of
 * every list).
 *
 * <p>Descriptors hold no state; two are equal when their names are.
 */
public abstract class SequenceAlgorithm {

    /**
     * One configuration of a sequence-parallel attention job.
     *
     * @param workers P
     * @param length  the global sequence length N
     * @param heads   H, query heads (0 when not known yet: checked by the algorithm at its first forward pass)
     * @param kvHeads Hkv, key/value heads (0 when not known yet)
     * @param causal  causal masking by global position
     * @param window  sliding window width, 0 for none (softmax algorithms)
     * @param layout  which positions each worker holds; null for the algorithm's default
     * @param options the algorithm's own options by name ({@link #options()}); missing ones take their defaults
     */
    public record Settings(int workers, int length, long heads, long kvHeads, boolean causal, int window,
                           SequenceLayout layout, Map<String, Double> options) {

        public Settings {
            options = Map.copyOf(options == null ? Map.of() : options);
        }

        /** P workers, N positions, heads not known yet, no window, the default layout, no options. */
        public static Settings of(int workers, int length, boolean causal) {
            return new Settings(workers, length, 0, 0, causal, 0, null, Map.of());
        }

        /** These settings with known head counts. */
        public Settings withHeads(long h, long hkv) {
            return new Settings(workers, length, h, hkv, causal, window, layout, options);
        }

        /** These settings with a sliding window. */
        public Settings withWindow(int w) {
            return new Settings(workers, length, heads, kvHeads, causal, w, layout, options);
        }

        /** These settings with a layout (null for the algorithm's default). */
        public Settings withLayout(SequenceLayout l) {
            return new Settings(workers, length, heads, kvHeads, causal, window, l, options);
        }

        /** These settings with one more option. */
        public Settings withOption(String name, double value) {
            Map<String, Double> o = new LinkedHashMap<>(options);
            o.put(name, value);
            return new Settings(workers, length, heads, kvHeads, causal, window, layout, o);
        }

        /** These settings with P workers. */
        public Settings withWorkers(int p) {
            return new Settings(p, length, heads, kvHeads, causal, window, layout, options);
        }
    }

    /**
     * An option of one algorithm beyond the common settings.
     *
     * @param name        its name in {@link Settings#options()} and on the command line ({@code --team}, ...)
     * @param description one line for help texts
     * @param integer     whether only whole numbers are accepted
     */
    public record Option(String name, String description, boolean integer) {
    }

    /**
     * Bytes one rank sends in each pass.
     *
     * @param forward  forward pass
     * @param backward backward pass
     */
    public record Volume(long forward, long backward) {
    }

    /**
     * The sizes the volume formulas are written in, for one rank's shard of {@code n = N/P} positions:
     * {@code X_q = B H n D w}, {@code X_kv = B Hkv n D w}, {@code X_lse = B H n w}, and the linear-attention state
     * {@code B H D D w}.
     */
    public record ShardBytes(long q, long kv, long lse, long state) {

        /** The sizes for B sequences, H and Hkv heads, n positions per rank, head size D, w bytes per element. */
        public static ShardBytes of(long batch, long heads, long kvHeads, long n, long headDim, long width) {
            return new ShardBytes(batch * heads * n * headDim * width, batch * kvHeads * n * headDim * width,
                    batch * heads * n * width, batch * heads * headDim * headDim * width);
        }
    }

    private static final class Registry {
        private static final List<SequenceAlgorithm> ALL = load();

        private static List<SequenceAlgorithm> load() {
            List<SequenceAlgorithm> all = new ArrayList<>();
            for (SequenceAlgorithm a : ServiceLoader.load(SequenceAlgorithm.class, SequenceAlgorithm.class
                    .getClassLoader())) {
                if (all.contains(a)) {
                    throw new IllegalStateException("two sequence-parallel algorithms are named " + a.name());
                }
                all.add(a);
            }
            return List.copyOf(all);
        }
    }

    /** The known algorithms, in the order of the services file. */
    public static List<SequenceAlgorithm> all() {
        return Registry.ALL;
    }

    /**
     * The algorithm of a name, ignoring case.
     *
     * @throws IllegalArgumentException naming the known algorithms
     */
    public static SequenceAlgorithm byName(String name) {
        for (SequenceAlgorithm a : all()) {
            if (a.name().equalsIgnoreCase(name.strip())) {
                return a;
            }
        }
        throw new IllegalArgumentException("unknown sequence-parallel algorithm '" + name + "'; expected one of "
                + names());
    }

    /** The known names, comma-separated. */
    public static String names() {
        return all().stream().map(SequenceAlgorithm::name).collect(Collectors.joining(", "));
    }

    /** The names of the softmax (or the linear) algorithms, comma-separated. */
    public static String names(boolean softmax) {
        return all().stream().filter(a -> a.softmax() == softmax).map(SequenceAlgorithm::name)
                .collect(Collectors.joining(", "));
    }

    /** The linear-attention algorithm a trainer runs for linear layers: the first one listed. */
    public static SequenceAlgorithm linearDefault() {
        return all().stream().filter(a -> !a.softmax()).findFirst()
                .orElseThrow(() -> new IllegalStateException("no linear-attention algorithm is listed"));
    }

    /** The name {@code --algo} and {@code --strategy} take. */
    public abstract String name();

    /** The paper, section and algorithm it follows, for docs and reports. */
    public abstract String source();

    /** One line for help texts. */
    public abstract String description();

    /** Softmax attention (O and LSE) rather than linear attention (O only). */
    public boolean softmax() {
        return true;
    }

    /** The options it takes beyond the common settings; none unless overridden. */
    public List<Option> options() {
        return List.of();
    }

    /**
     * The value an option takes when the settings do not give it, for P workers.
     *
     * @throws IllegalArgumentException for an option this algorithm does not take
     */
    public double defaultOption(String name, int workers) {
        throw new IllegalArgumentException(name() + " takes no option '" + name + "'");
    }

    /** An option's value in {@code s}: given, or its default. */
    public final double option(Settings s, String name) {
        Double v = s.options().get(name);
        return v != null ? v : defaultOption(name, s.workers());
    }

    /**
     * The layout this algorithm uses when none is asked for: by default zigzag when causal (every rank gets an
     * equal share of the causal triangle), contiguous otherwise.
     */
    public SequenceLayout defaultLayout(boolean causal) {
        return causal ? SequenceLayout.ZIGZAG : SequenceLayout.CONTIGUOUS;
    }

    /** The layouts it accepts; all unless overridden. */
    public Set<SequenceLayout> layouts() {
        return EnumSet.allOf(SequenceLayout.class);
    }

    /** Why it needs its layouts (e.g. "the chain of algorithm 2"), for the refusal of another. */
    protected String layoutReason() {
        return "";
    }

    /** The layout of {@code s}: its own, or the default. */
    public final SequenceLayout layout(Settings s) {
        return s.layout() == null ? defaultLayout(s.causal()) : s.layout();
    }

    /**
     * Checks what only this algorithm knows (after the common checks); nothing unless overridden.
     *
     * @throws IllegalArgumentException naming what was expected and what came
     */
    protected void check(Settings s) {
    }

    /**
     * Checks a configuration without communicating: every worker (and a launcher) can call it first.
     *
     * @throws IllegalArgumentException naming what was expected and what came, in one line
     */
    public final void validate(Settings s) {
        String name = name() + ": ";
        if (s.workers() < 1) {
            throw new IllegalArgumentException(name + "workers must be >= 1, got " + s.workers());
        }
        if (s.heads() > 0 && (s.kvHeads() < 1 || s.heads() % s.kvHeads() != 0)) {
            throw new IllegalArgumentException(name + "H = " + s.heads() + " query heads must be a multiple of Hkv = "
                    + s.kvHeads());
        }
        if (s.window() < 0) {
            throw new IllegalArgumentException(name + "window must be >= 0, got " + s.window());
        }
        if (!softmax() && s.window() != 0) {
            throw new IllegalArgumentException(name + "linear attention has no sliding window, got window "
                    + s.window());
        }
        for (Map.Entry<String, Double> o : s.options().entrySet()) {
            Option known = options().stream().filter(x -> x.name().equals(o.getKey())).findFirst().orElse(null);
            if (known == null) {
                String takers = all().stream().filter(a -> a.options().stream().anyMatch(x -> x.name()
                        .equals(o.getKey()))).map(SequenceAlgorithm::name).collect(Collectors.joining(", "));
                throw new IllegalArgumentException(name + "takes no option '" + o.getKey() + "'"
                        + (takers.isEmpty() ? "" : " (" + takers + " does)"));
            }
            double v = o.getValue();
            if (known.integer() && (Double.isNaN(v) || v != Math.rint(v))) {
                throw new IllegalArgumentException(name + o.getKey() + " must be a whole number, got " + v);
            }
        }
        SequenceLayout layout = layout(s);
        if (!layouts().contains(layout)) {
            String needed = layouts().stream().map(l -> l.name().toLowerCase(Locale.ROOT))
                    .collect(Collectors.joining(" or "));
            throw new IllegalArgumentException(name() + " needs the " + needed + " layout"
                    + (layoutReason().isEmpty() ? "" : " (" + layoutReason() + ")") + ", got "
                    + layout.name().toLowerCase(Locale.ROOT));
        }
        check(s);
        int parts = layout == SequenceLayout.ZIGZAG ? 2 * s.workers() : s.workers();
        if (s.length() < parts || s.length() % parts != 0) {
            throw new IllegalArgumentException(name + "N = " + s.length() + " must be a positive multiple of "
                    + parts + " for the " + layout.name().toLowerCase(Locale.ROOT) + " layout over " + s.workers()
                    + " workers");
        }
    }

    /** How many collective channels one instance takes from {@link Channels#SEQUENCE}; one by default. */
    public int channels() {
        return 1;
    }

    /**
     * This worker's instance on its own channels, after {@link #validate}.
     *
     * @param transport all P ranks, rank order = shard order
     * @param channels  the {@link #channels()} channels it may use
     * @param s         valid settings
     */
    protected abstract SequenceParallelAttention<?> build(Transport transport, Channels channels, Settings s);

    /**
     * This worker's instance.
     *
     * @param transport the job's transport: all P ranks, rank order = shard order
     * @throws IllegalArgumentException if the settings are invalid or do not match the transport
     */
    public final SequenceParallelAttention<?> create(Transport transport, Settings s) {
        validate(s);
        if (transport.worldSize() != s.workers()) {
            throw new IllegalArgumentException(name() + ": the transport has " + transport.worldSize()
                    + " ranks, the settings say P = " + s.workers());
        }
        return build(transport, Channels.SEQUENCE.take(channels()), s);
    }

    /**
     * This worker's instance for a linear attention layer with its own op and decay (linear algorithms only).
     *
     * @param channels the channels it may use
     * @throws UnsupportedOperationException for a softmax algorithm
     */
    public SequenceParallelLinearAttention<?> createLinear(Transport transport, Channels channels, LinearAttention op,
                                                           Decay decay, boolean causal) {
        throw new UnsupportedOperationException(name() + " is softmax attention; linear layers need "
                + names(false));
    }

    /**
     * The bytes rank {@code rank} sends in each pass with valid settings {@code s} (no sliding window), for
     * shards of the sizes {@code x}: what the transport counts, exactly.
     */
    public abstract Volume volume(Settings s, ShardBytes x, int rank);

    /**
     * Its alpha-beta cost model for the planner ({@code attn4j plan}): the forward and backward schedules of
     * messages and compute it runs on a problem, for each configuration worth pricing.
     *
     * @param options options to price as given (e.g. WallFacer's {@code team}); missing ones may be searched
     */
    public abstract AlgorithmModel costModel(Map<String, Double> options);

    /** A short name of the configuration it runs with {@code s}, for benchmark rows (e.g. "C=2", "zigzag"). */
    public String configuration(Settings s) {
        return layout(s).name().toLowerCase(Locale.ROOT);
    }

    @Override
    public final boolean equals(Object o) {
        return o instanceof SequenceAlgorithm a && a.name().equals(name());
    }

    @Override
    public final int hashCode() {
        return name().hashCode();
    }

    @Override
    public String toString() {
        return name();
    }
}
