package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A tiny {@code attn4j bench transport} run writes its three files; the numbers themselves are not tested. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TransportBenchCommandTest {

    @TempDir
    Path tmp;

    @Test
    void writesCsvChartAndMarkdownSection() throws Exception {
        // A stand-in for the Open MPI anchor: prints its CSV, so the comparison columns are checked without MPI.
        Path mpi = Files.createDirectories(tmp.resolve("mpi"));
        Files.writeString(mpi.resolve("run.sh"), "echo op,workers,bytes,median_us,bus_gbps\n"
                + "echo latency,2,4096,5.0,0.815\necho all-gather,2,16384,7.6,1.073\n"
                + "echo reduce-scatter,2,16384,8.8,0.933\necho all-gather,3,16384,9.1,1.201\n");
        CliRun run = CliRun.of("bench", "transport", "--min-size", "4k", "--max-size", "8k", "--ring-min-size", "16k",
                "--ring-max-size", "16k", "--ring-workers", "2,3", "--repeats", "2", "--warm-up", "0.2",
                "--heap", "512m", "--compare-mpi", mpi.toString(), "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-transport.csv"));
        String all = String.join("\n", csv);
        assertEquals("source,kind,workers,bytes,median_us,gb_per_s,bus_gb_per_s,p99_us", csv.get(0));
        // 2 sizes x (latency, bandwidth, both ways); 2 rings x 2 collectives; the anchor's 4 lines.
        assertEquals(1 + 2 * 3 + 2 * 2 + 4, csv.size(), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-ipc,p2p-bandwidth,2,8192,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-ipc,p2p-both,2,8192,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-ipc,p2p-latency,2,4096,")
                && !l.endsWith(",")), all);                     // with its 99th percentile
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-ipc,allgather,3,16380,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-ipc,reducescatter,2,16384,")), all);
        assertTrue(csv.contains("openmpi-tcp,allgather,2,16384,7.600,,1.0730,"), all);
        byte[] png = Files.readAllBytes(tmp.resolve("bench-transport.png"));
        assertArrayEquals(new byte[] {(byte) 0x89, 'P', 'N', 'G'}, Arrays.copyOf(png, 4));
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("| 8 KB | ") && !md.contains("Point-to-point bandwidth at 16 MB"), md);
        assertTrue(md.contains("| 4 KB | ") && md.contains("| 5.0 µs |"), md);            // Open MPI's latency
        assertTrue(md.contains("| 1.073 GB/s |") && md.contains("| 0.933 GB/s |")
                && md.contains("| 1.201 GB/s |"), md);                                     // and bus bandwidths
        BenchMarkdown.assertMethodInOneParagraph(md, "Transport: Aeron between worker processes");
    }

    @Test
    void reportsEachFigureAsItsMedianOverAlternatingRounds() throws Exception {
        // The stand-in anchor crashes on its first call, as Open MPI's start-up now and then does (the benchmark runs
        // it once more), then reports a different all-gather figure on each call (2, then 1, then 3 GB/s), so the
        // median (2) differs from the first and the last round's.
        Path mpi = Files.createDirectories(tmp.resolve("mpi"));
        Files.writeString(mpi.resolve("run.sh"), "here=$(dirname \"$0\"); n=$(cat \"$here/calls\" 2>/dev/null || echo 0)\n"
                + "n=$((n + 1)); echo $n > \"$here/calls\"\n"
                + "if [ $n = 1 ]; then echo 'PMIX ERROR: stand-in crash' >&2; exit 139; fi\n"
                + "echo op,workers,bytes,median_us,bus_gbps\n"
                + "case $n in 2) g=2.000;; 3) g=1.000;; *) g=3.000;; esac\n"
                + "echo all-gather,2,16384,7.6,$g\n");
        CliRun run = CliRun.of("bench", "transport", "--min-size", "4k", "--max-size", "4k", "--ring-min-size", "16k",
                "--ring-max-size", "16k", "--ring-workers", "2", "--repeats", "2", "--warm-up", "0.2", "--rounds", "3",
                "--heap", "512m", "--compare-mpi", mpi.toString(), "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        assertEquals("4", Files.readString(mpi.resolve("calls")).strip());
        assertTrue(run.out().contains("exited with 139 and printed 0 results; running it once more"), run.out());
        List<String> rounds = Files.readAllLines(tmp.resolve("bench-transport-rounds.csv"));
        String all = String.join("\n", rounds);
        assertEquals("round,source,kind,workers,bytes,median_us,gb_per_s,bus_gb_per_s,p99_us", rounds.get(0));
        // Per round: latency, bandwidth, both ways; all-gather and reduce-scatter; the anchor's line.
        assertEquals(1 + 3 * 6, rounds.size(), all);
        for (int r = 1; r <= 3; r++) {
            assertTrue(rounds.contains(r + ",openmpi-tcp,allgather,2,16384,7.600,,"
                    + (r == 1 ? "2" : r == 2 ? "1" : "3") + ".0000,"), all);
        }
        List<String> csv = Files.readAllLines(tmp.resolve("bench-transport.csv"));
        assertTrue(csv.contains("openmpi-tcp,allgather,2,16384,7.600,,2.0000,"), String.join("\n", csv));
        // attn4j's all-gather time: the middle of the three rounds' times.
        double[] times = rounds.stream().filter(l -> l.contains(",attn4j-ipc,allgather,2,"))
                .mapToDouble(l -> Double.parseDouble(l.split(",")[5])).sorted().toArray();
        assertEquals(3, times.length, all);
        String median = csv.stream().filter(l -> l.startsWith("attn4j-ipc,allgather,2,")).findFirst().orElseThrow();
        assertEquals(times[1], Double.parseDouble(median.split(",")[4]), 1e-3, median);
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("The whole measurement ran 3 times, attn4j's runs alternating with Open MPI's; every "
                + "figure below is its median over the 3 rounds"), md);
        assertTrue(run.out().contains("round 3 of 3"), run.out());
    }

    @Test
    void runsTheRingsAcrossNetworkNamespacesBesideIperf3() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(
                org.attn4j.distributed.launch.NamespaceCluster.unavailable().isEmpty(),
                "network namespaces need root and the ip tool");
        CliRun run = CliRun.of("bench", "transport", "--min-size", "4k", "--max-size", "4k", "--ring-min-size", "64k",
                "--ring-max-size", "64k", "--ring-workers", "2", "--repeats", "2", "--warm-up", "0.2",
                "--namespaces", "2", "--network", "udp", "--link-mtu", "9000", "--heap", "512m", "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-transport.csv"));
        String all = String.join("\n", csv);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-udp,ns-allgather,2,65536,")), all);
        assertTrue(csv.stream().anyMatch(l -> l.startsWith("attn4j-udp,ns-reducescatter,2,65536,")), all);
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("Across 2 network namespaces on a bridge"), md);
        // The workers' datagrams follow the links' jumbo frames: 9000 less the IPv4 and UDP headers, to 32 bytes.
        assertTrue(md.contains("veth links of MTU 9000") && md.contains("UDP datagrams of up to 8960 bytes"), md);
        if (Files.isExecutable(Path.of("/usr/bin/iperf3"))) {
            assertTrue(csv.stream().anyMatch(l -> l.startsWith("iperf3,iperf3,2,0,,")), all);
            assertTrue(csv.stream().anyMatch(l -> l.startsWith("iperf3,iperf3-ring,2,0,,")), all);
            assertTrue(md.contains("iperf3 (TCP, 3 s) from the first to the second alone"), md);
            assertTrue(md.contains("per link with every link of the ring sending at once"), md);
        } else {
            assertTrue(run.out().contains("iperf3 is not installed"), run.out());
        }
        if (onPath("gcc")) {
            // The bare ring ran each kind at the size, and its results checked out (it exits non-zero otherwise).
            for (String kind : List.of("bare-allgather", "bare-reducescatter", "bare-crc-allgather",
                    "bare-crc-reducescatter")) {
                assertTrue(csv.stream().anyMatch(l -> l.startsWith("bare-ring," + kind + ",2,65536,")), all);
            }
            assertTrue(md.contains("The bare ring across the same namespaces"), md);
        }
    }

    @Test
    void runsOpenMpiWithOneRankInEachNamespace() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(
                org.attn4j.distributed.launch.NamespaceCluster.unavailable().isEmpty(),
                "network namespaces need root and the ip tool");
        org.junit.jupiter.api.Assumptions.assumeTrue(onPath("mpicc") && onPath("mpirun"), "Open MPI is not installed");
        // A stand-in for the anchor: run.sh prints one loopback line; colls.c, built and started across the
        // namespaces by the benchmark, prints from rank 0 how many distinct network namespaces its ranks ran in,
        // in the bus bandwidth column.
        Path mpi = Files.createDirectories(tmp.resolve("mpi"));
        Files.writeString(mpi.resolve("run.sh"), "echo op,workers,bytes,median_us,bus_gbps\n"
                + "echo all-gather,2,65536,9.0,1.500\n");
        Files.writeString(mpi.resolve("colls.c"), """
                #include <mpi.h>
                #include <stdio.h>
                #include <sys/stat.h>
                int main(int argc, char **argv) {
                    MPI_Init(&argc, &argv);
                    int rank, size;
                    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
                    MPI_Comm_size(MPI_COMM_WORLD, &size);
                    struct stat st;
                    stat("/proc/self/ns/net", &st);
                    unsigned long mine = st.st_ino, all[64];
                    MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG, all, 1, MPI_UNSIGNED_LONG, MPI_COMM_WORLD);
                    if (rank == 0) {
                        int distinct = 0;
                        for (int i = 0; i < size; i++) {
                            int seen = 0;
                            for (int j = 0; j < i; j++) seen |= all[j] == all[i];
                            distinct += !seen;
                        }
                        printf("op,workers,bytes,median_us,bus_gbps\\n");
                        printf("all-gather,%d,65536,1.0,%d.0\\n", size, distinct);
                    }
                    MPI_Finalize();
                    return 0;
                }
                """);
        CliRun run = CliRun.of("bench", "transport", "--min-size", "4k", "--max-size", "4k", "--ring-min-size", "64k",
                "--ring-max-size", "64k", "--ring-workers", "2", "--repeats", "2", "--warm-up", "0.2",
                "--namespaces", "2", "--heap", "512m", "--compare-mpi", mpi.toString(), "--out", tmp.toString());
        assertEquals(0, run.exitCode(), run.err() + run.out());
        List<String> csv = Files.readAllLines(tmp.resolve("bench-transport.csv"));
        String all = String.join("\n", csv);
        assertTrue(csv.contains("openmpi-tcp,allgather,2,65536,9.000,,1.5000,"), all);
        assertTrue(csv.contains("openmpi-tcp,ns-allgather,2,65536,1.000,,2.0000,"), all);   // 2 namespaces
        String md = Files.readString(tmp.resolve("benchmarks.md"));
        assertTrue(md.contains("| all-gather bus bandwidth | Open MPI | reduce-scatter bus bandwidth | Open MPI |"),
                md);
        assertTrue(md.contains(" | 2.000 GB/s | "), md);
    }

    private static boolean onPath(String tool) {
        String path = System.getenv("PATH");
        return path != null && Arrays.stream(path.split(":")).anyMatch(d -> Files.isExecutable(Path.of(d, tool)));
    }

    @Test
    void refusesAnUnknownPathAndAMissingAnchor() {
        CliRun run = CliRun.of("bench", "transport", "--path", "sctp", "--out", tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("--path must be ipc, tcp or udp, got \"sctp\""), run.err());
        run = CliRun.of("bench", "transport", "--rounds", "0", "--out", tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("--rounds must be in [1, 25], got 0"), run.err());
        run = CliRun.of("bench", "transport", "--network", "ipc", "--out", tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("--network must be tcp or udp, got \"ipc\""), run.err());
        run = CliRun.of("bench", "transport", "--compare-mpi", tmp.resolve("nowhere").toString(), "--out",
                tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("--compare-mpi: expected a directory with run.sh"), run.err());
    }

    @Test
    void refusesBadSizes() {
        CliRun run = CliRun.of("bench", "transport", "--max-size", "lots", "--out", tmp.toString());
        assertEquals(Attn4jCli.EXIT_BAD_INPUT, run.exitCode());
        assertTrue(run.err().contains("--max-size must be a byte count such as 4096, 4k or 64m, got \"lots\""),
                run.err());
    }
}
