package org.attn4j.samples.bench;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.distributed.launch.NamespaceCluster;
import org.attn4j.samples.UserInputException;
import org.attn4j.samples.io.FileTrees;

/**
 * One figure of Open MPI's collectives as the mpi-collectives anchor prints it
 * ({@code op,workers,bytes,median_us,bus_gbps}), under this benchmark's kind names: {@code p2p-latency},
 * {@code allgather}, {@code reducescatter}.
 *
 * @param kind      what was measured
 * @param workers   the ranks
 * @param bytes     the message or collective size
 * @param medianUs  the median time (half a round trip for latency)
 * @param busGbps   bus bandwidth (GB/s, 10^9 bytes), as the anchor computes it
 */
record MpiRow(String kind, int workers, long bytes, double medianUs, double busGbps) {

    /** Parses one CSV line of the anchor, or returns null for its header. */
    static MpiRow parse(String line) {
        String[] f = line.strip().split(",");
        if (f.length != 5 || f[0].equals("op")) {
            return null;
        }
        String kind = switch (f[0]) {
            case "latency" -> "p2p-latency";
            case "all-gather" -> "allgather";
            case "reduce-scatter" -> "reducescatter";
            default -> f[0];
        };
        return new MpiRow(kind, Integer.parseInt(f[1]), Long.parseLong(f[2]), Double.parseDouble(f[3]),
                Double.parseDouble(f[4]));
    }

    /** Each figure's median over the rounds, in the first round's order. */
    static List<MpiRow> medians(List<List<MpiRow>> rounds) {
        return RoundMedians.of(rounds, r -> List.of(r.kind(), r.workers(), r.bytes()),
                r -> new double[] {r.medianUs(), r.busGbps()},
                (r, m) -> new MpiRow(r.kind(), r.workers(), r.bytes(), m[0], m[1]));
    }

    /**
     * Runs {@code dir/run.sh} for each ring size and parses what it prints.
     *
     * @throws UserInputException in one line when the anchor fails or prints nothing usable
     */
    static List<MpiRow> run(Path dir, List<Integer> workers, PrintWriter log) throws IOException,
            InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("bash", dir.resolve("run.sh").toString()));
        workers.forEach(p -> cmd.add(Integer.toString(p)));
        Path output = Files.createTempFile("attn4j-mpi", ".csv");
        try {
            return results(cmd, output, null, log);
        } finally {
            Files.deleteIfExists(output);
        }
    }

    /**
     * Runs the anchor's program with one rank in each host of {@code cluster} (Open MPI over TCP between the
     * namespaces, {@code mpirun} started in the first and reaching the others through {@code ip netns exec} as
     * its remote shell), after {@link #run} has installed Open MPI. Each host has one slot, so Open MPI would spin
     * while it waits; the ranks yield instead ({@code mpi_yield_when_idle}), as they do on one machine with more
     * ranks than cores and as attn4j's workers across the namespaces do.
     *
     * @return the rows under their kinds prefixed by {@code ns-}
     * @throws UserInputException in one line when Open MPI fails or prints nothing usable
     */
    static List<MpiRow> acrossNamespaces(Path dir, NamespaceCluster cluster, PrintWriter log) throws IOException,
            InterruptedException {
        Path work = Files.createTempDirectory("attn4j-mpi-ns");
        try {
            Path program = work.resolve("colls");
            List<String> build = List.of("mpicc", "-O2", "-o", program.toString(), dir.resolve("colls.c").toString());
            Process cc = new ProcessBuilder(build).redirectErrorStream(true).start();
            String ccOut = new String(cc.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            if (cc.waitFor() != 0) {
                throw new UserInputException("--compare-mpi: " + String.join(" ", build) + " failed: "
                        + ccOut.lines().findFirst().orElse("no output"));
            }
            StringBuilder hosts = new StringBuilder();
            StringBuilder agent = new StringBuilder("#!/bin/sh\n"
                    + "# mpirun's remote shell: runs the command in the network namespace of the host named\n"
                    + "while [ \"${1#-}\" != \"$1\" ]; do shift; done\n"
                    + "host=$1; shift\ncase \"$host\" in\n");
            for (int i = 0; i < cluster.hosts(); i++) {
                hosts.append(cluster.address(i)).append(" slots=1\n");
                agent.append("  ").append(cluster.address(i)).append(") ns=").append(cluster.namespace(i))
                        .append(" ;;\n");
            }
            agent.append("  *) echo \"no namespace for host $host\" >&2; exit 1 ;;\nesac\n"
                    + "exec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n");
            Path hostfile = Files.writeString(work.resolve("hosts"), hosts);
            Path shell = Files.writeString(work.resolve("netns-rsh"), agent);
            Files.setPosixFilePermissions(shell, PosixFilePermissions.fromString("rwx------"));
            List<String> cmd = new ArrayList<>(cluster.prefix(0));
            cmd.addAll(List.of("mpirun", "--allow-run-as-root", "-np", Integer.toString(cluster.hosts()),
                    "--hostfile", hostfile.toString(), "--mca", "plm_rsh_agent", shell.toString(), "--bind-to", "none",
                    "--mca", "mpi_yield_when_idle", "1", "--mca", "btl", "tcp,self", "--mca", "pml", "ob1",
                    "--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0",
                    program.toString()));
            List<MpiRow> rows = new ArrayList<>();
            for (MpiRow r : results(cmd, work.resolve("mpirun.csv"), work.resolve("mpirun.log"), log)) {
                rows.add(new MpiRow("ns-" + r.kind(), r.workers(), r.bytes(), r.medianUs(), r.busGbps()));
            }
            return rows;
        } finally {
            FileTrees.delete(work);
        }
    }

    /**
     * Runs {@code cmd} for at most {@value #TIMEOUT_MINUTES} minutes, its output to {@code output} and its
     * stderr to {@code errors} (or discarded), and parses the output.
     */
    private static List<MpiRow> results(List<String> cmd, Path output, Path errors, PrintWriter log)
            throws IOException, InterruptedException {
        String failed = attempt(cmd, output, errors, log);
        if (failed != null) {
            // Open MPI's start-up now and then crashes in PMIx (seen once in several dozen runs across the
            // namespaces: "PMIX ERROR ... dstore_base.c", exit 139); one more try before the benchmark gives up.
            log.println(failed + "; running it once more");
            failed = attempt(cmd, output, errors, log);
            if (failed != null) {
                throw new UserInputException(failed);
            }
        }
        return parseAll(output);
    }

    /** The result lines of {@code output}. */
    private static List<MpiRow> parseAll(Path output) throws IOException {
        List<MpiRow> rows = new ArrayList<>();
        for (String line : Files.readAllLines(output, StandardCharsets.UTF_8)) {
            try {
                MpiRow row = parse(line);
                if (row != null) {
                    rows.add(row);
                }
            } catch (NumberFormatException e) {
                // not a result line
            }
        }
        return rows;
    }

    /**
     * Runs {@code cmd} once; null if it exited with 0 and printed results, else why not.
     *
     * @throws UserInputException when it runs past the time limit
     */
    private static String attempt(List<String> cmd, Path output, Path errors, PrintWriter log)
            throws IOException, InterruptedException {
        log.println("running Open MPI's collectives: " + String.join(" ", cmd));
        log.flush();
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectOutput(output.toFile()).redirectError(errors == null
                ? ProcessBuilder.Redirect.DISCARD : ProcessBuilder.Redirect.to(errors.toFile()));
        // PMIx's key-value store in a hash table rather than in shared-memory segments (its "dstore", where the
        // crash above happens); it only serves the ranks' start-up, not the collectives timed.
        pb.environment().putIfAbsent("PMIX_MCA_gds", "hash");
        Process p = pb.start();
        if (!p.waitFor(TIMEOUT_MINUTES, TimeUnit.MINUTES)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new UserInputException("--compare-mpi: " + String.join(" ", cmd) + " ran past " + TIMEOUT_MINUTES
                    + " minutes");
        }
        int exit = p.exitValue();
        int results = parseAll(output).size();
        if (exit == 0 && results > 0) {
            return null;
        }
        String why = errors == null || !Files.isRegularFile(errors) ? ""
                : Files.readAllLines(errors, StandardCharsets.UTF_8).stream().filter(l -> !l.isBlank()).findFirst()
                .map(l -> ": " + l.strip()).orElse("");
        return "--compare-mpi: " + String.join(" ", cmd) + " exited with " + exit + " and printed " + results
                + " results" + why;
    }

    private static final int TIMEOUT_MINUTES = 20;
}
