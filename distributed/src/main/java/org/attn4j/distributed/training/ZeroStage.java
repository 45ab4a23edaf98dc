package org.attn4j.distributed.training;

/**
 * How much of the training state each of the W workers holds (ZeRO, Rajbhandari et al.), selectable per run.
 * The flattened parameter vector is cut into W equal slices; worker {@code r} owns slice {@code r}.
 */
public enum ZeroStage {

    /** No sharding: gradients all-reduced, every worker keeps the whole optimizer state and updates everything. */
    NONE(0),
    /**
     * Stage 1: gradients all-reduced, but each worker keeps the optimizer state of its own slice only, updates that
     * slice with the DL4J updater, and the slices are all-gathered.
     */
    OPTIMIZER_STATE(1),
    /** Stage 2: as stage 1, but gradients are reduce-scattered, so each worker only ever holds its slice's sum. */
    GRADIENTS(2),
    /**
     * Stage 3: as stage 2, and between steps a worker keeps only its own parameter slice; the full vector is
     * gathered at the start of the next step, just before the forward pass (DL4J's layers read one flat
     * parameter vector, so the gathered copy lives for the step).
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
