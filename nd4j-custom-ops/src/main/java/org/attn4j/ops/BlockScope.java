package org.attn4j.ops;

import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.memory.conf.WorkspaceConfiguration;
import org.nd4j.linalg.api.memory.enums.AllocationPolicy;
import org.nd4j.linalg.api.memory.enums.LearningPolicy;
import org.nd4j.linalg.api.memory.enums.ResetPolicy;
import org.nd4j.linalg.api.memory.enums.SpillPolicy;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The workspace of one block of a portable kernel (a row of tiles, a chunk): its temporaries are freed when the
 * block ends and the memory serves the next block, instead of waiting for the garbage collector (which let resident
 * memory grow by hundreds of MB). What must outlive the block is allocated before it, or updated in place.
 * Internal to attn4j.
 */
public final class BlockScope {

    private static final WorkspaceConfiguration CONFIG = WorkspaceConfiguration.builder().initialSize(0)
            .overallocationLimit(0.2).policyAllocation(AllocationPolicy.OVERALLOCATE)
            .policyLearning(LearningPolicy.OVER_TIME).policyReset(ResetPolicy.BLOCK_LEFT)
            .policySpill(SpillPolicy.REALLOCATE).build();

    private BlockScope() {
    }

    /** Opens the workspace {@code id} on this thread until the returned scope is closed. */
    public static MemoryWorkspace enter(String id) {
        return Nd4j.getWorkspaceManager().getAndActivateWorkspace(CONFIG, id);
    }
}
