package org.attn4j.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Optional;

import org.junit.jupiter.api.Test;

/** Which OpenBLAS kernels to ask for, from /proc/cpuinfo. */
class BlasKernelsTest {

    private static final String AVX512 = "fpu sse2 avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16";

    private static String cpuinfo(String vendor, String flags) {
        return "processor\t: 0\nvendor_id\t: " + vendor + "\ncpu family\t: 26\nmodel name\t: X\nflags\t\t: " + flags
                + "\n\nprocessor\t: 1\nvendor_id\t: " + vendor + "\nflags\t\t: " + flags + "\n";
    }

    @Test
    void amdWithAvx512AsksForTheSkylakeXKernels() {
        assertEquals(Optional.of("SKYLAKEX"), BlasKernels.preferred(cpuinfo("AuthenticAMD", AVX512)));
    }

    @Test
    void otherwiseOpenBlasChoosesForItself() {
        assertEquals(Optional.empty(), BlasKernels.preferred(cpuinfo("GenuineIntel", AVX512)), "Intel");
        assertEquals(Optional.empty(), BlasKernels.preferred(cpuinfo("AuthenticAMD", "fpu sse2 avx2 fma")), "Zen 3");
        assertEquals(Optional.empty(), BlasKernels.preferred(
                cpuinfo("AuthenticAMD", AVX512.replace("avx512vl", ""))), "no VL");
        assertEquals(Optional.empty(), BlasKernels.preferred(""), "no cpuinfo");
    }
}
