package org.attn4j.ops;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.slf4j.LoggerFactory;

/**
 * Which OpenBLAS kernels the process runs, and which it should ask for.
 *
 * <p>OpenBLAS chooses its kernels once, when the library loads, from the CPU it recognises or from the
 * {@code OPENBLAS_CORETYPE} variable. On AMD processors with AVX-512 (Zen 4, Zen 5) the version ND4J M2.1 ships
 * (0.3.19) does not recognise the CPU and takes its AVX2 "Haswell" kernels; its AVX-512 "SkylakeX" kernels run
 * there too, and measured on this project's 2-core AMD EPYC a float32 512 x 512 x 64 gemm went from 115 to
 * 210 GFLOP/s on one thread and from 229 to about 400 on two (flash attention forward, N = 4096: 24.6 to 16.1 ms).
 * Since the choice is made before any Java code runs, it is made where the JVM is started: {@code ./attn4j} and
 * the worker launchers set the variable by {@link #preferred()}, and the first gemm says once, in the log, when a
 * process on such a CPU runs without it.
 */
public final class BlasKernels {

    /** The variable OpenBLAS reads when it loads. */
    public static final String VARIABLE = "OPENBLAS_CORETYPE";

    private static final Set<String> AVX512 = Set.of("avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl");
    private static final AtomicBoolean ADVISED = new AtomicBoolean();

    private BlasKernels() {
    }

    /** The value for {@value #VARIABLE} on this machine, or empty where OpenBLAS's own choice is right. */
    public static Optional<String> preferred() {
        try {
            return preferred(Files.readString(Path.of("/proc/cpuinfo"), StandardCharsets.UTF_8));
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /**
     * The value for {@value #VARIABLE} given the text of {@code /proc/cpuinfo}: "SKYLAKEX" for an AMD processor whose
     * flags include AVX-512 F, DQ, CD, BW and VL (what those kernels use); empty otherwise, Intel included (OpenBLAS
     * recognises its AVX-512 processors itself).
     */
    static Optional<String> preferred(String cpuinfo) {
        boolean amd = false;
        Set<String> flags = Set.of();
        for (String line : cpuinfo.split("\n")) {
            int colon = line.indexOf(':');
            if (colon < 0) {
                continue;
            }
            String key = line.substring(0, colon).strip();
            String value = line.substring(colon + 1).strip();
            if (key.equals("vendor_id")) {
                amd = value.equals("AuthenticAMD");
            } else if (key.equals("flags")) {
                flags = Set.of(value.split("\\s+"));
                break;                                       // the first processor speaks for all
            }
        }
        return amd && flags.containsAll(AVX512) ? Optional.of("SKYLAKEX") : Optional.empty();
    }

    /** Logs once per process when {@link #preferred()} names kernels and {@value #VARIABLE} is not set. */
    static void adviseOnce() {
        if (ADVISED.get() || ADVISED.getAndSet(true)) {           // a read on every gemm, a write once
            return;
        }
        Optional<String> want = preferred();
        if (want.isPresent() && System.getenv(VARIABLE) == null) {
            LoggerFactory.getLogger(BlasKernels.class).warn("OpenBLAS chose its kernels without {} on this AMD CPU "
                    + "with AVX-512; start the JVM with {}={} for about twice the gemm rate (docs/threading.md)",
                    VARIABLE, VARIABLE, want.get());
        }
    }
}
