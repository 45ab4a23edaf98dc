package org.attn4j.ops;

import java.util.Locale;

import org.nd4j.linalg.factory.Nd4j;

/**
 * Which implementation of the attention ops runs: the CPU kernels (BLAS on the arrays' host buffers, the JDK Vector
 * API and Java loops between the products; the fastest on ND4J's CPU backend) or the portable ones (made only of
 * ND4J operations, which every backend runs on its own device). The system property {@code attn4j.kernel} chooses:
 * {@code auto} (the default: the CPU kernels on the CPU backend, the portable ones on any other), {@code cpu} or
 * {@code portable}. It is read at every call, so a test can switch it.
 */
public enum Kernel {
    /** BLAS on host buffers and Java between the products: ND4J's CPU backend only. */
    CPU,
    /** ND4J operations only: any backend. */
    PORTABLE;

    /** The system property that chooses the kernel. */
    public static final String PROPERTY = "attn4j.kernel";

    /**
     * The kernel that runs now.
     *
     * @throws IllegalArgumentException for a value of {@code attn4j.kernel} other than auto, cpu or portable
     * @throws IllegalStateException    for {@code cpu} on a backend that is not the CPU one
     */
    public static Kernel current() {
        String value = System.getProperty(PROPERTY, "auto").strip().toLowerCase(Locale.ROOT);
        boolean cpuBackend = Nd4j.getEnvironment().isCPU();
        return switch (value) {
            case "auto" -> cpuBackend ? CPU : PORTABLE;
            case "portable" -> PORTABLE;
            case "cpu" -> {
                if (!cpuBackend) {
                    throw new IllegalStateException(PROPERTY + "=cpu reads the arrays' host buffers, which this ND4J "
                            + "backend does not keep current; use auto or portable");
                }
                yield CPU;
            }
            default -> throw new IllegalArgumentException(PROPERTY + " must be auto, cpu or portable, got '" + value
                    + "'");
        };
    }
}
