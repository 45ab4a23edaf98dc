package org.attn4j.layers;

import org.attn4j.ops.Documents;
import org.deeplearning4j.exception.DL4JInvalidInputException;

/**
 * The documents of the batch a network is computing, for packed sequences: while a scope is open on a thread,
 * every {@link FlashAttentionLayer} and {@link LinearAttentionLayer} of a network run on that thread attends only
 * within each document (softmax: a query sees keys of its own document; linear: the state restarts at each one).
 * <pre>
 *   try (PackedSequences.Scope s = PackedSequences.enter(Documents.of(ids))) {   // ids [B, N], -1 = padding
 *       net.fit(features, labels);                  // MultiLayerNetwork or ComputationGraph
 *   }
 * </pre>
 * Why not the feature mask or a second input: DL4J's own layers multiply activations by the feature mask
 * ({@code EmbeddingSequenceLayer} does, through {@code Broadcast.mul}), so ids there would scale embeddings, and a
 * MultiLayerNetwork has one input. The ids are by global position: on one device {@code [B, N]} for inputs of N
 * steps; on a sequence-parallel worker the whole sequence's table, which {@code DistributedTrainer} enters for its
 * batch (it reads the ids from the DataSet, see {@code Packing} in the distributed module). The scope lives in a
 * thread-local, like {@link SequenceParallel}'s context.
 */
public final class PackedSequences {

    private static final ThreadLocal<Documents> CURRENT = new ThreadLocal<>();

    private PackedSequences() {
    }

    /** Leaves the documents it was entered with (restoring the ones before). */
    public interface Scope extends AutoCloseable {
        @Override
        void close();
    }

    /**
     * Makes {@code documents} the documents of this thread's batch until the returned scope is closed.
     *
     * @param documents ids by global position, or null for one document per sequence
     */
    public static Scope enter(Documents documents) {
        Documents before = CURRENT.get();
        CURRENT.set(documents);
        return () -> {
            if (before == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(before);
            }
        };
    }

    /** The documents of this thread's batch, or null for one document per sequence. */
    public static Documents current() {
        return CURRENT.get();
    }

    /**
     * The current documents, checked against a layer's input: {@code batch} sequences of {@code length} global
     * positions (the layer's steps on one device, the run's N on a worker's shard).
     *
     * @throws DL4JInvalidInputException naming the layer, the expected and the actual size
     */
    static Documents forInput(String layer, long batch, long length) {
        Documents d = CURRENT.get();
        if (d != null && (d.batch() != batch || d.length() != length)) {
            throw new DL4JInvalidInputException(layer + ": document ids must have shape [" + batch + ", " + length
                    + "] (the batch and its global positions), got [" + d.batch() + ", " + d.length() + "]");
        }
        return d;
    }
}
