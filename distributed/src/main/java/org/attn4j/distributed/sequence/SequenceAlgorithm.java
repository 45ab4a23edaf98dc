package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.linear.Decay;

/**
 * The sequence-parallel algorithms by name, with what each accepts: one place to validate a configuration before
 * any communication and to build the algorithm for one worker. Used by {@code attn4j check --algo NAME} and the
 * distributed benchmark.
 * <pre>
 *   name                 layouts                  P                         team C
 *   ring                 any                      any                       1
 *   wallfacer            any                      C^2 divides P             C
 *   attention2d          striped (cyclic)         any (rectangular grids)   1
 *   attention2d-overlap  striped (cyclic)         any (rectangular grids)   1
 *   lasp                 contiguous               any                       1
 *   ulysses              any                      divides H and Hkv         1
 * </pre>
 */
public enum SequenceAlgorithm {

    /** {@link RingAttention} (BurstAttention). */
    RING("ring", true),
    /** {@link WallFacerAttention}. */
    WALLFACER("wallfacer", true),
    /** {@link Attention2D} (ATTENTION2D-NO). */
    ATTENTION2D("attention2d", true),
    /** {@link Attention2DOverlap} (ATTENTION2D-O). */
    ATTENTION2D_OVERLAP("attention2d-overlap", true),
    /** {@link LaspAttention}: linear attention with decay. */
    LASP("lasp", false),
    /** {@link UlyssesAttention}. */
    ULYSSES("ulysses", true);

    private final String cliName;
    private final boolean softmax;

    SequenceAlgorithm(String cliName, boolean softmax) {
        this.cliName = cliName;
        this.softmax = softmax;
    }

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
     * @param team    WallFacer's team size C (1 for the others)
     * @param decay   decay rate lambda in (0, 1] of LASP (1 for none)
     */
    public record Settings(int workers, int length, long heads, long kvHeads, boolean causal, int window,
                           SequenceLayout layout, int team, double decay) {
    }

    /** The name {@code --algo} takes. */
    public String cliName() {
        return cliName;
    }

    /** Softmax attention (O and LSE) rather than linear attention (O only). */
    public boolean softmax() {
        return softmax;
    }

    /** The layout this algorithm uses when none is asked for. */
    public SequenceLayout defaultLayout(boolean causal) {
        return switch (this) {
            case ATTENTION2D, ATTENTION2D_OVERLAP -> SequenceLayout.STRIPED;
            case LASP, ULYSSES -> SequenceLayout.CONTIGUOUS;
            case RING, WALLFACER -> causal ? SequenceLayout.ZIGZAG : SequenceLayout.CONTIGUOUS;
        };
    }

    /** The layout of {@code s}: its own, or the default. */
    public SequenceLayout layout(Settings s) {
        return s.layout() == null ? defaultLayout(s.causal()) : s.layout();
    }

    /**
     * Checks a configuration without communicating: every worker (and a launcher) can call it first.
     *
     * @throws IllegalArgumentException naming what was expected and what came
     */
    public void validate(Settings s) {
        String name = cliName + ": ";
        if (s.workers() < 1) {
            throw new IllegalArgumentException(name + "workers must be >= 1, got " + s.workers());
        }
        boolean headsKnown = s.heads() > 0;
        if (headsKnown && (s.kvHeads() < 1 || s.heads() % s.kvHeads() != 0)) {
            throw new IllegalArgumentException(name + "H = " + s.heads() + " query heads must be a multiple of Hkv = "
                    + s.kvHeads());
        }
        if (s.window() < 0) {
            throw new IllegalArgumentException(name + "window must be >= 0, got " + s.window());
        }
        if (s.team() != 1 && this != WALLFACER) {
            throw new IllegalArgumentException(name + "a team size applies to wallfacer only, got C = " + s.team());
        }
        SequenceLayout layout = layout(s);
        switch (this) {
            case ATTENTION2D, ATTENTION2D_OVERLAP -> requireLayout(layout, SequenceLayout.STRIPED,
                    "the cyclic distribution of section 3.2");
            case LASP -> {
                requireLayout(layout, SequenceLayout.CONTIGUOUS, "the chain of algorithm 2");
                if (s.window() != 0) {
                    throw new IllegalArgumentException(name + "linear attention has no sliding window, got window "
                            + s.window());
                }
                if (!(s.decay() > 0 && s.decay() <= 1)) {
                    throw new IllegalArgumentException(name + "decay must be in (0, 1], got " + s.decay());
                }
                if (!s.causal() && s.decay() != 1) {
                    throw new IllegalArgumentException(name + "non-causal linear attention has no decay, got "
                            + s.decay());
                }
            }
            case WALLFACER -> {
                if (s.team() < 1 || s.workers() % (s.team() * s.team()) != 0) {
                    throw new IllegalArgumentException(name + "team size C = " + s.team() + " with P = " + s.workers()
                            + " workers; C^2 must divide P");
                }
            }
            case ULYSSES -> {
                if (headsKnown && (s.heads() % s.workers() != 0 || s.kvHeads() % s.workers() != 0)) {
                    throw new IllegalArgumentException(name + "P = " + s.workers() + " workers must divide both H = "
                            + s.heads() + " and Hkv = " + s.kvHeads() + " (Ulysses splits heads; its degree is "
                            + "bounded by the K/V heads)");
                }
            }
            default -> {
            }
        }
        int parts = layout == SequenceLayout.ZIGZAG ? 2 * s.workers() : s.workers();
        if (s.length() < parts || s.length() % parts != 0) {
            throw new IllegalArgumentException(name + "N = " + s.length() + " must be a positive multiple of "
                    + parts + " for the " + layout.name().toLowerCase(Locale.ROOT) + " layout over " + s.workers()
                    + " workers");
        }
    }

    /**
     * This worker's instance, after {@link #validate}.
     *
     * @param transport the job's transport: all P ranks, rank order = shard order
     */
    public SequenceParallelAttention<?> create(Transport transport, Settings s) {
        validate(s);
        if (transport.worldSize() != s.workers()) {
            throw new IllegalArgumentException(cliName + ": the transport has " + transport.worldSize()
                    + " ranks, the settings say P = " + s.workers());
        }
        SequenceLayout layout = layout(s);
        return switch (this) {
            case RING -> new RingAttention(Communicator.world(transport), layout, s.length(), s.causal(), s.window());
            case WALLFACER -> new WallFacerAttention(transport, s.team(), layout, s.length(), s.causal(), s.window());
            case ATTENTION2D -> new Attention2D(transport, s.length(), s.causal(), s.window());
            case ATTENTION2D_OVERLAP -> new Attention2DOverlap(transport, s.length(), s.causal(), s.window());
            case LASP -> new LaspAttention(Communicator.world(transport), s.causal() ? Decay.of(s.decay())
                    : Decay.none(), s.causal());
            case ULYSSES -> new UlyssesAttention(Communicator.world(transport), layout, s.length(), s.causal(),
                    s.window());
        };
    }

    /**
     * The algorithm of a name, ignoring case.
     *
     * @throws IllegalArgumentException naming the known algorithms
     */
    public static SequenceAlgorithm byName(String name) {
        for (SequenceAlgorithm a : values()) {
            if (a.cliName.equalsIgnoreCase(name.strip())) {
                return a;
            }
        }
        throw new IllegalArgumentException("unknown sequence-parallel algorithm '" + name + "'; expected one of "
                + names());
    }

    /** The known names, comma-separated. */
    public static String names() {
        List<String> names = new ArrayList<>();
        for (SequenceAlgorithm a : values()) {
            names.add(a.cliName);
        }
        return String.join(", ", names);
    }

    private void requireLayout(SequenceLayout got, SequenceLayout needed, String why) {
        if (got != needed) {
            throw new IllegalArgumentException(cliName + " needs the " + needed.name().toLowerCase(Locale.ROOT)
                    + " layout (" + why + "), got " + got.name().toLowerCase(Locale.ROOT));
        }
    }
}
