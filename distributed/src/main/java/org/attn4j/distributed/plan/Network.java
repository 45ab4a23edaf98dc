package org.attn4j.distributed.plan;

/**
 * The alpha-beta cost of one {@link Round} on a {@link ClusterSpec}. Each message pays its link's latency
 * (alpha) once, and its bytes move at the pace of the most loaded resource on its path (beta): messages of the
 * same round that share a resource share its bandwidth, so a resource carrying {@code b} bytes in the round at
 * {@code c} bytes per second needs {@code b / c} seconds. The round lasts as long as its slowest message.
 *
 * <pre>
 *   inside a node:   sender's link out, receiver's link in                       intraGBps each
 *   between nodes:   sender's adapter out, receiver's adapter in                 interGBps each (one per worker)
 *                    sender's node out, receiver's node in                        nicsPerNode x interGBps
 * </pre>
 * This is what makes placement matter: the four workers of a node that all send across the network at once share
 * the node's one adapter, while a ring in which one worker per node crosses uses it alone.
 */
public final class Network {

    private final ClusterSpec cluster;

    public Network(ClusterSpec cluster) {
        this.cluster = cluster;
    }

    /** Seconds until the last message of the round has arrived; 0 for a round in which nobody sends. */
    public double seconds(Round round) {
        int p = cluster.workers();
        double[] intraOut = new double[p];
        double[] intraIn = new double[p];
        double[] interOut = new double[p];
        double[] interIn = new double[p];
        double[] nodeOut = new double[cluster.nodes()];
        double[] nodeIn = new double[cluster.nodes()];
        for (Round.Flow f : round.flows()) {
            for (int r = 0; r < p; r++) {
                if (!f.sends(r)) {
                    continue;
                }
                int to = f.to()[r];
                if (cluster.node(r) == cluster.node(to)) {
                    intraOut[r] += f.bytes();
                    intraIn[to] += f.bytes();
                } else {
                    interOut[r] += f.bytes();
                    interIn[to] += f.bytes();
                    nodeOut[cluster.node(r)] += f.bytes();
                    nodeIn[cluster.node(to)] += f.bytes();
                }
            }
        }
        double intra = cluster.intraGBps() * 1e9;
        double adapter = cluster.interGBps() * 1e9;
        double node = adapter * cluster.nicsPerNode();
        double slowest = 0;
        for (Round.Flow f : round.flows()) {
            for (int r = 0; r < p; r++) {
                if (!f.sends(r)) {
                    continue;
                }
                int to = f.to()[r];
                double t;
                if (cluster.node(r) == cluster.node(to)) {
                    t = cluster.intraLatencyUs() * 1e-6 + Math.max(intraOut[r], intraIn[to]) / intra;
                } else {
                    double busiest = Math.max(Math.max(interOut[r], interIn[to]) / adapter,
                            Math.max(nodeOut[cluster.node(r)], nodeIn[cluster.node(to)]) / node);
                    t = cluster.interLatencyUs() * 1e-6 + busiest;
                }
                slowest = Math.max(slowest, t);
            }
        }
        return slowest;
    }
}
