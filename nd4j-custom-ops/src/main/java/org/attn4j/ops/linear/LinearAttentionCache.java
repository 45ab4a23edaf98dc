package org.attn4j.ops.linear;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The state entering every chunk, kept by the forward pass so the backward pass need not rebuild it
 * (LASP section 2.3, "KV state caching"): {@code [B, H, T, D, D]} for T chunks of size {@code chunk}.
 * Opaque to callers; valid only for the inputs and op it came from.
 */
public final class LinearAttentionCache {

    final INDArray states;
    final int chunk;
    /** Where each chunk starts (chunks are also cut at document boundaries), plus the end. */
    final int[] starts;
    private volatile boolean released;

    LinearAttentionCache(INDArray states, int chunk, int[] starts) {
        this.states = states;
        this.chunk = chunk;
        this.starts = starts;
    }

    /**
     * Frees the cached states now rather than when the garbage collector finds them: at long N they are
     * {@code N / chunk} states of {@code D x D} per head (64 MB at N = 1M, D = 64, float32, chunk 256). A
     * released cache cannot be passed to the backward pass (it says so); releasing twice does nothing. States
     * made inside an ND4J workspace stay with the workspace.
     */
    public void release() {
        released = true;
        if (states != null) {
            states.close();     // does nothing for an array in a workspace: the workspace owns that memory
        }
    }

    boolean released() {
        return released;
    }

    /** Bytes held by the cached states. */
    public long bytes() {
        return states == null ? 0 : states.length() * states.dataType().width();
    }
}
