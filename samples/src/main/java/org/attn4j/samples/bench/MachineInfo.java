package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Properties;

import org.nd4j.linalg.factory.Nd4j;

/**
 * Where a benchmark ran, for its report.
 *
 * @param cores               processors the JVM sees
 * @param cpuModel            CPU model name, or "unknown"
 * @param memTotalBytes       physical memory, or -1
 * @param ompNumThreads       {@code OMP_NUM_THREADS}, or "unset"
 * @param openblasNumThreads  {@code OPENBLAS_NUM_THREADS}, or "unset"
 * @param javaVersion         {@code java.version}
 * @param nd4jVersion         ND4J's version from its jar, or "unknown"
 * @param openblasCoreType    {@code OPENBLAS_CORETYPE} (the gemm kernels asked for), or "unset" (OpenBLAS chose)
 */
public record MachineInfo(int cores, String cpuModel, long memTotalBytes, String ompNumThreads,
                          String openblasNumThreads, String javaVersion, String nd4jVersion,
                          String openblasCoreType) {

    /** This machine. */
    public static MachineInfo current() {
        return new MachineInfo(Runtime.getRuntime().availableProcessors(), readCpuModel(),
                procLong("/proc/meminfo", "MemTotal"), env("OMP_NUM_THREADS"), env("OPENBLAS_NUM_THREADS"),
                System.getProperty("java.version"), readNd4jVersion(), env("OPENBLAS_CORETYPE"));
    }

    /**
     * "2 cores (AMD EPYC 7B13), 23.5 GiB RAM, Java 17.0.15, ND4J 1.0.0-M2.1, OpenBLAS's Haswell kernels": the
     * machine in a report (the kernels only when OPENBLAS_CORETYPE chooses them).
     */
    public String describe() {
        String ram = memTotalBytes > 0 ? String.format(java.util.Locale.ROOT, ", %.1f GiB RAM",
                memTotalBytes / (double) (1L << 30)) : "";
        String kernels = openblasCoreType.equals("unset") ? "" : ", OpenBLAS's " + openblasCoreType + " kernels";
        return cores + " cores (" + cpuModel + ")" + ram + ", Java " + javaVersion + ", ND4J " + nd4jVersion + kernels;
    }

    /** {@code MemAvailable} from /proc/meminfo in bytes, or -1 where there is none. */
    public static long memAvailableBytes() {
        return procLong("/proc/meminfo", "MemAvailable");
    }

    private static String env(String name) {
        String v = System.getenv(name);
        return v == null ? "unset" : v;
    }

    private static String readCpuModel() {
        for (String line : lines("/proc/cpuinfo")) {
            if (line.startsWith("model name")) {
                return line.substring(line.indexOf(':') + 1).strip();
            }
        }
        return "unknown";
    }

    private static long procLong(String file, String key) {
        for (String line : lines(file)) {
            if (line.startsWith(key + ":")) {
                String kb = line.substring(key.length() + 1).replace("kB", "").strip();
                return Long.parseLong(kb) * 1024;
            }
        }
        return -1;
    }

    private static List<String> lines(String file) {
        try {
            return Files.readAllLines(Path.of(file), StandardCharsets.UTF_8);
        } catch (IOException | RuntimeException e) {
            return List.of();
        }
    }

    private static String readNd4jVersion() {
        try (InputStream in = Nd4j.class.getResourceAsStream("/META-INF/maven/org.nd4j/nd4j-api/pom.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties p = new Properties();
            p.load(in);
            return p.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
