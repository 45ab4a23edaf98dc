package org.attn4j.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The backend a run expects is the one ND4J loaded: {@code .ci/cuda-check} sets {@code attn4j.expectBackend=cuda},
 * so its equality tests cannot pass on the CPU backend by accident (ND4J falls back to the CPU when CUDA does not
 * load). Without the property, as in {@code .ci/run}, there is nothing to check.
 */
class BackendCheckTest {

    @Test
    void theExpectedBackendIsLoadedAndPicksItsKernel() {
        String expected = System.getProperty("attn4j.expectBackend");
        assumeTrue(expected != null, "attn4j.expectBackend not set: no backend expected");
        boolean cpu = Nd4j.getEnvironment().isCPU();
        String loaded = Nd4j.getBackend().getClass().getName();
        assertEquals(expected.equals("cpu"), cpu, "expected the " + expected + " backend, ND4J loaded " + loaded);
        assertEquals(cpu ? Kernel.CPU : Kernel.PORTABLE, Kernel.current(), "the kernel chosen on " + loaded);
    }
}
