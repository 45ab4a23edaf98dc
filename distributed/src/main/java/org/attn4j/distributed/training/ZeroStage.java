package org.attn4j.distributed.training;

/**
 * How much of the training state each of the W workers holds (ZeRO, Rajbhandari et al., SC 2020), selectable per
 * run. The flattened parameter vector is cut into W near-equal slices; worker {@code r} owns slice {@code r}.
 * DL4J keeps one flat parameter and one flat gradient array per network, so stages 2 and 3 cannot shrink those
 * buffers; they hand the resident pages of the slices a worker does not own back to the operating system. Within a
 * step the whole gradient is written by DL4J's backward pass. Per-stage memory and traffic: {@code docs/training.md}.
 */
public enum ZeroStage {

    /** No sharding: gradients all-reduced, every worker keeps the whole optimizer state and updates everything. */
    NONE(0),
    /**
     * Stage 1: each worker keeps the optimizer state of its own slice only; the gradients are reduce-scattered,
     * each worker updates its slice, and the slices are all-gathered (the traffic of an all-reduce).
     */
    OPTIMIZER_STATE(1),
    /** Stage 2: as stage 1, and between steps a worker keeps only its slice of the gradient resident. */
    GRADIENTS(2),
    /**
     * Stage 3: as stage 2, and between the steps of an epoch ({@code fit(iterator)}) a worker keeps only its slice
     * of the parameters resident. During a step, attn4j's attention layers gather their parameters when they run
     * and release them afterwards; the other layers' parameters are gathered at the start of the step (all of them
     * when the network has listeners of its own), and the whole vector for the trainer's listeners and at the end
     * of every public {@code fit}, which returns with the network whole.
     */
    PARAMETERS(3);

    private final int stage;

    ZeroStage(int stage) {
        this.stage = stage;
    }

    /** 0 to 3. */
    public int stage() {
        return stage;
    }

    /** The stage of a number 0 to 3. */
    public static ZeroStage of(int stage) {
        for (ZeroStage z : values()) {
            if (z.stage == stage) {
                return z;
            }
        }
        throw new IllegalArgumentException("ZeRO stage must be 0, 1, 2 or 3, got " + stage);
    }
}
