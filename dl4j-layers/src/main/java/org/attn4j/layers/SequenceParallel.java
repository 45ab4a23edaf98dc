package org.attn4j.layers;

import java.util.Arrays;

import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.flash.LocalAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LocalLinearAttention;
import org.attn4j.ops.linear.SequenceParallelLinearAttention;
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The run-time sequence-parallel context the attention layers consult: when a worker runs its network on its
 * shard of every sequence, a trainer (in the distributed module) enters a {@link Context} on the worker's thread,
 * and every {@link FlashAttentionLayer} and {@link LinearAttentionLayer} then computes attention with the
 * context's sequence-parallel algorithm instead of the one-device op. A saved configuration therefore never
 * holds ranks or hosts: the same network runs on one worker or on many.
 * <pre>
 *   try (SequenceParallel.Scope s = SequenceParallel.enter(context)) {
 *       net.computeGradientAndScore();          // attention layers talk to the other workers of the group
 *   }
 * </pre>
 * The context lives in a thread-local, so several in-JVM workers (one thread each) can each have their own.
 */
public final class SequenceParallel {

    private static final ThreadLocal<Context> CURRENT = new ThreadLocal<>();

    private SequenceParallel() {
    }

    /** What a layer needs to know about the sequence-parallel run it is part of. */
    public interface Context {
        /** The global sequence length N of the current batch. */
        int length();

        /** The global positions of this worker's time steps, in the order its input holds them. */
        int[] positions();

        /**
         * The sequence length that rotary embeddings with dynamic scaling read: {@link #length()}, unless a prefill
         * runs in parts (a sharded part, then steps decoded after it), when every part reads the whole prompt's
         * length, as the prompt passed at once would.
         */
        default int rotaryLength() {
            return length();
        }

        /**
         * The softmax attention of this worker's sequence group for a layer with these mask settings. Every
         * worker of the group gets the matching instance and calls it in the same order.
         */
        SequenceParallelAttention<?> softmax(boolean causal, int window);

        /** The linear attention (LASP) of this worker's sequence group, with the layer's local op and decay. */
        SequenceParallelLinearAttention<?> linear(LinearAttention op, Decay decay, boolean causal);

        /**
         * Makes a layer's parameters readable until the returned use is closed: a trainer that keeps only a slice
         * of every parameter vector resident (ZeRO stage 3) gathers the layer's parameters here and releases
         * them at the close. Every worker calls it for the same layers in the same order. Default: they are
         * always resident.
         *
         * @param parameters the layer's view of the network's flat parameter vector
         */
        default ParameterUse useParameters(INDArray parameters) {
            return NO_USE;
        }

        /**
         * Decoding after a sequence-parallel prefill ({@code rnnTimeStep}), or null while the worker runs its shard
         * of a sequence (training, the prefill itself). While decoding, every worker of the group gets the same new
         * steps, {@link #positions()} are their global positions and {@link #length()} the steps seen with them.
         */
        default Decoding decoding() {
            return null;
        }
    }

    /**
     * What the attention layers of a worker do while decoding after a sequence-parallel prefill: each worker keeps
     * its share of the key/value cache, attends the new queries to it, and the group merges the partial results
     * (output and log-sum-exp, BurstAttention's merge), so that every worker gets the attention over all keys.
     */
    public interface Decoding {
        /** Whether this worker keeps the key and value of the step at global position {@code position}. */
        boolean keeps(int position);

        /** The new steps' attention over the group's keys, from this worker's over its own ({@code O, LSE}). */
        AttentionOutput merge(AttentionOutput local);
    }

    /** One use of a layer's parameters ({@link Context#useParameters}); closing it ends the use. */
    public interface ParameterUse extends AutoCloseable {
        @Override
        void close();
    }

    private static final ParameterUse NO_USE = () -> { };

    /**
     * {@link Context#useParameters} of this thread's context, or a use that does nothing when the layers run on
     * one device or {@code parameters} is null (a layer without parameters).
     */
    public static ParameterUse useParameters(INDArray parameters) {
        Context c = CURRENT.get();
        return c == null || parameters == null ? NO_USE : c.useParameters(parameters);
    }

    /** Leaves the context it was entered with (restoring the one before). */
    public interface Scope extends AutoCloseable {
        @Override
        void close();
    }

    /** The context of this thread, or null when the layers run on one device. */
    public static Context current() {
        return CURRENT.get();
    }

    /**
     * Makes {@code context} this thread's context until the returned scope is closed.
     *
     * @param context the context, not null
     */
    public static Scope enter(Context context) {
        if (context == null) {
            throw new IllegalArgumentException("SequenceParallel.enter: context is null");
        }
        Context before = CURRENT.get();
        CURRENT.set(context);
        return () -> {
            if (before == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(before);
            }
        };
    }

    /**
     * The softmax attention a layer runs on this thread: the context's algorithm on a worker's shard, or
     * {@link LocalAttention} on one device. The layers call only the returned interface.
     *
     * @param layer      the layer, for messages
     * @param batch      the input's batch size
     * @param timeSteps  the input's sequence length
     * @param causal     causal mask
     * @param window     sliding window, 0 for none
     * @param keyPadding the feature mask {@code [B, N]} (1 = real step), or null
     * @throws DL4JInvalidInputException if the input does not fit the sequence-parallel context
     */
    static SequenceParallelAttention<?> softmax(String layer, long batch, long timeSteps, boolean causal, int window,
                                                INDArray keyPadding) {
        Context c = CURRENT.get();
        if (c == null) {
            return new LocalAttention(FlashAttention.defaults(),
                    AttentionMask.builder().causal(causal).window(window).keyPadding(keyPadding)
                            .documents(PackedSequences.forInput(layer, batch, timeSteps)).build());
        }
        checkShard(c, layer, timeSteps, keyPadding != null);
        return c.softmax(causal, window).withDocuments(PackedSequences.forInput(layer, batch, c.length()));
    }

    /**
     * The linear attention a layer runs on this thread: the context's LASP on a worker's shard, or
     * {@link LocalLinearAttention} on one device.
     *
     * @param batch  the input's batch size
     * @param masked whether the input has a feature mask (refused sequence-parallel)
     * @throws DL4JInvalidInputException if the input does not fit the sequence-parallel context
     */
    static SequenceParallelLinearAttention<?> linear(String layer, long batch, long timeSteps, boolean masked,
                                                     LinearAttention op, Decay decay, boolean causal) {
        Context c = CURRENT.get();
        if (c == null) {
            return new LocalLinearAttention(op, decay, causal).withDocuments(PackedSequences.forInput(layer, batch,
                    timeSteps));
        }
        checkShard(c, layer, timeSteps, masked);
        return c.linear(op, decay, causal).withDocuments(PackedSequences.forInput(layer, batch, c.length()));
    }

    /**
     * The global position of each of a layer's time steps: the context's positions on a worker's shard,
     * {@code 0 .. timeSteps-1} on one device.
     *
     * @throws DL4JInvalidInputException if the input does not fit the sequence-parallel context
     */
    static int[] positions(String layer, long timeSteps) {
        Context c = CURRENT.get();
        if (c == null) {
            int[] positions = new int[Math.toIntExact(timeSteps)];
            Arrays.setAll(positions, t -> t);
            return positions;
        }
        // a per-step mask is no obstacle here, unlike in attention: every step is handled on its own
        checkShard(c, layer, timeSteps, false);
        return c.positions();
    }

    /**
     * What a layer's message about the sequence length should say for an input of {@code timeSteps} steps:
     * that length on one device, the global N of the sequence-parallel run on a worker's shard.
     */
    static String lengthHint(long timeSteps) {
        Context c = CURRENT.get();
        return c == null ? "sequences of " + timeSteps + " steps need maxLength >= " + timeSteps
                : "the sequence-parallel run has N = " + c.length();
    }

    /**
     * Checks that a layer's input fits the context: as many time steps as the worker holds positions, and no
     * per-step mask (key padding is not supported sequence-parallel).
     *
     * @throws DL4JInvalidInputException naming the layer and what was expected
     */
    private static void checkShard(Context c, String layer, long timeSteps, boolean masked) {
        if (timeSteps != c.positions().length) {
            throw new DL4JInvalidInputException(layer + ": sequence-parallel input has " + timeSteps
                    + " time steps, but this worker holds " + c.positions().length + " positions of N = "
                    + c.length() + " (" + Arrays.toString(Arrays.copyOf(c.positions(),
                    Math.min(4, c.positions().length))) + "...)");
        }
        if (masked) {
            throw new DL4JInvalidInputException(layer + ": per-step masks (key padding) are not supported "
                    + "sequence-parallel; pad to whole sequences or train on one worker");
        }
    }
}
