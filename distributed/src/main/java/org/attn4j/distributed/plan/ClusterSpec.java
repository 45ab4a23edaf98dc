package org.attn4j.distributed.plan;

/**
 * The machines of a plan: {@code nodes} nodes of {@code workersPerNode} workers each, ranks placed node-major
 * (rank {@code r} on node {@code r / workersPerNode}), and the two kinds of link between them.
 *
 * <p>A message inside a node costs {@code intraLatencyUs} plus its bytes at {@code intraGBps}; a message between
 * nodes costs {@code interLatencyUs} plus its bytes at {@code interGBps}, the bandwidth of one network adapter, of
 * which a node has {@code nicsPerNode} and a worker uses one. Messages in flight at once share these links
 * ({@link Network}).
 *
 * @param nodes          nodes, at least 1
 * @param workersPerNode workers (GPUs) per node, at least 1
 * @param intraGBps      bandwidth of a worker's link inside its node, GB/s (10^9 bytes per second)
 * @param intraLatencyUs latency of one message inside a node, microseconds
 * @param interGBps      bandwidth of one network adapter between nodes, GB/s
 * @param interLatencyUs latency of one message between nodes, microseconds
 * @param nicsPerNode    network adapters per node, at least 1
 */
public record ClusterSpec(int nodes, int workersPerNode, double intraGBps, double intraLatencyUs,
                          double interGBps, double interLatencyUs, int nicsPerNode) {

    /** The most workers a plan simulates (every round lists one message per worker). */
    public static final int MAX_WORKERS = 1 << 16;

    /** @throws IllegalArgumentException naming the first value out of range */
    public ClusterSpec {
        atLeastOne("--nodes", nodes);
        atLeastOne("--workers-per-node", workersPerNode);
        atLeastOne("--nics", nicsPerNode);
        positive("--intra-bw", intraGBps, "GB/s");
        positive("--inter-bw", interGBps, "GB/s");
        nonNegative("--intra-latency", intraLatencyUs, "us");
        nonNegative("--inter-latency", interLatencyUs, "us");
        if ((long) nodes * workersPerNode > MAX_WORKERS) {
            throw new IllegalArgumentException("P = nodes x workers per node = " + (long) nodes * workersPerNode
                    + " is more than the " + MAX_WORKERS + " workers the model simulates");
        }
    }

    /** The number of workers P. */
    public int workers() {
        return nodes * workersPerNode;
    }

    /** The node of a rank (ranks are placed node-major). */
    public int node(int rank) {
        return rank / workersPerNode;
    }

    /** This cluster with {@code nics} network adapters per node, the rest kept. */
    public ClusterSpec withNicsPerNode(int nics) {
        return new ClusterSpec(nodes, workersPerNode, intraGBps, intraLatencyUs, interGBps, interLatencyUs, nics);
    }

    private static void atLeastOne(String name, int value) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + value);
        }
    }

    static void positive(String name, double value, String unit) {
        if (!(Double.isFinite(value) && value > 0)) {
            throw new IllegalArgumentException(name + " must be a finite positive number (" + unit + "), got "
                    + value);
        }
    }

    static void nonNegative(String name, double value, String unit) {
        if (!(Double.isFinite(value) && value >= 0)) {
            throw new IllegalArgumentException(name + " must be a finite number >= 0 (" + unit + "), got " + value);
        }
    }
}
