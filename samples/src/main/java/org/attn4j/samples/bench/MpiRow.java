package org.attn4j.samples.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import org.attn4j.samples.UserInputException;

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

    /**
     * Runs {@code dir/run.sh} for each ring size and parses what it prints.
     *
     * @throws UserInputException in one line when the anchor fails or prints nothing usable
     */
    static List<MpiRow> run(Path dir, List<Integer> workers, PrintWriter log) throws IOException,
            InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("bash", dir.resolve("run.sh").toString()));
        workers.forEach(p -> cmd.add(Integer.toString(p)));
        log.println("running Open MPI's collectives: " + String.join(" ", cmd));
        log.flush();
        Process p = new ProcessBuilder(cmd).redirectErrorStream(false)
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        List<String> lines;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            lines = r.lines().collect(Collectors.toList());
        }
        int exit = p.waitFor();
        List<MpiRow> rows = new ArrayList<>();
        for (String line : lines) {
            try {
                MpiRow row = parse(line);
                if (row != null) {
                    rows.add(row);
                }
            } catch (NumberFormatException e) {
                // not a result line
            }
        }
        if (exit != 0 || rows.isEmpty()) {
            throw new UserInputException("--compare-mpi: " + String.join(" ", cmd) + " exited with " + exit
                    + " and printed " + rows.size() + " results");
        }
        return rows;
    }
}
