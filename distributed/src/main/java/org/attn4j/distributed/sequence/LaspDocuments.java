package org.attn4j.distributed.sequence;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.ops.Documents;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Non-causal LASP with documents: each document's state is the sum of {@code K^T V} over its own positions, which
 * may lie on several consecutive members (contiguous layout). A document inside one member's shard needs nothing
 * from the others; only the documents that straddle a shard boundary (at most P - 1 per sequence, known to every
 * member from the ids) are summed, in one all-reduce of their {@code D x D} states per K/V head. The backward pass
 * sums their {@code Q^T dO} the same way. Padding gives zero output and gradients.
 */
final class LaspDocuments {

    /** A run of one document (or padding) in this member's shard: local positions {@code [from, to)}. */
    private record Run(int from, int to, boolean padding, int slot) {
    }

    private final Communicator comm;
    private final Documents docs;

    LaspDocuments(Communicator comm, Documents docs) {
        this.comm = comm;
        this.docs = docs;
    }

    /** The forward pass on this member's shard; {@code kvOut} of the result is unset (zeros). */
    LinearAttentionOutput forward(INDArray q, INDArray k, INDArray v) {
        int b = (int) q.size(0);
        int hkv = (int) k.size(1);
        int group = (int) (q.size(1) / hkv);
        int d = (int) q.size(3);
        List<List<Run>> runs = runs(b, (int) q.size(2));
        int slots = slots();
        INDArray shared = slots == 0 ? null : Nd4j.zeros(q.dataType(), b, hkv, slots, d, d);
        INDArray[][][] own = perRun(runs, hkv, shared, (i, hk, run) -> kv(k, v, i, hk, run));
        INDArray total = shared == null ? null : comm.allReduce(shared);
        INDArray out = Nd4j.zeros(q.dataType(), q.shape());
        for (int i = 0; i < b; i++) {
            for (int h = 0; h < q.size(1); h++) {
                int hk = h / group;
                for (int r = 0; r < runs.get(i).size(); r++) {
                    Run run = runs.get(i).get(r);
                    if (!run.padding) {
                        rows(out, i, h, run).assign(rows(q, i, h, run).mmul(state(total, own, i, hk, r, run)));
                    }
                }
            }
        }
        return new LinearAttentionOutput(out, Nd4j.zeros(q.dataType(), b, q.size(1), d, d), null);
    }

    /** The backward pass of {@link #forward} on the same shard. */
    LinearAttentionGradients backward(INDArray q, INDArray k, INDArray v, INDArray dO) {
        int b = (int) q.size(0);
        int hkv = (int) k.size(1);
        int group = (int) (q.size(1) / hkv);
        int d = (int) q.size(3);
        List<List<Run>> runs = runs(b, (int) q.size(2));
        int slots = slots();
        INDArray sharedKv = slots == 0 ? null : Nd4j.zeros(q.dataType(), b, hkv, slots, d, d);
        INDArray sharedG = slots == 0 ? null : Nd4j.zeros(q.dataType(), b, hkv, slots, d, d);
        INDArray[][][] kvOwn = perRun(runs, hkv, sharedKv, (i, hk, run) -> kv(k, v, i, hk, run));
        INDArray[][][] gOwn = perRun(runs, hkv, sharedG, (i, hk, run) -> {
            INDArray g = Nd4j.zeros(q.dataType(), d, d);
            for (int h = hk * group; h < (hk + 1) * group; h++) {
                g.addi(rows(q, i, h, run).transpose().mmul(rows(dO, i, h, run)));
            }
            return g;
        });
        INDArray[] totals = new INDArray[2];
        if (slots > 0) {
            INDArray both = comm.allReduce(Nd4j.stack(0, sharedKv, sharedG));     // one all-reduce for the pair
            totals[0] = both.get(NDArrayIndex.point(0));
            totals[1] = both.get(NDArrayIndex.point(1));
        }
        INDArray dq = Nd4j.zeros(q.dataType(), q.shape());
        INDArray dk = Nd4j.zeros(k.dataType(), k.shape());
        INDArray dv = Nd4j.zeros(v.dataType(), v.shape());
        for (int i = 0; i < b; i++) {
            for (int hk = 0; hk < hkv; hk++) {
                for (int r = 0; r < runs.get(i).size(); r++) {
                    Run run = runs.get(i).get(r);
                    if (run.padding) {
                        continue;
                    }
                    INDArray s = state(totals[0], kvOwn, i, hk, r, run);
                    INDArray g = state(totals[1], gOwn, i, hk, r, run);
                    for (int h = hk * group; h < (hk + 1) * group; h++) {
                        rows(dq, i, h, run).assign(rows(dO, i, h, run).mmul(s.transpose()));
                    }
                    rows(dk, i, hk, run).assign(rows(v, i, hk, run).mmul(g.transpose()));
                    rows(dv, i, hk, run).assign(rows(k, i, hk, run).mmul(g));
                }
            }
        }
        return new LinearAttentionGradients(dq, dk, dv, Nd4j.zeros(q.dataType(), b, q.size(1), d, d), null);
    }

    /** A {@code D x D} sum over the positions of one run, per K/V head. */
    private interface RunSum {
        INDArray of(int i, int hk, Run run);
    }

    /**
     * {@code sum} of every run that is not padding, per sequence and K/V head; the runs of documents that straddle
     * a shard boundary are also added into their slot of {@code shared}.
     */
    private static INDArray[][][] perRun(List<List<Run>> runs, int hkv, INDArray shared, RunSum sum) {
        INDArray[][][] own = new INDArray[runs.size()][hkv][];
        for (int i = 0; i < runs.size(); i++) {
            for (int hk = 0; hk < hkv; hk++) {
                own[i][hk] = new INDArray[runs.get(i).size()];
                for (int r = 0; r < runs.get(i).size(); r++) {
                    Run run = runs.get(i).get(r);
                    if (run.padding) {
                        continue;
                    }
                    own[i][hk][r] = sum.of(i, hk, run);
                    if (run.slot >= 0) {
                        shared.get(NDArrayIndex.point(i), NDArrayIndex.point(hk), NDArrayIndex.point(run.slot))
                                .addi(own[i][hk][r]);
                    }
                }
            }
        }
        return own;
    }

    /** {@code K^T V} over one run of K/V head {@code hk}. */
    private static INDArray kv(INDArray k, INDArray v, int i, int hk, Run run) {
        return rows(k, i, hk, run).transpose().mmul(rows(v, i, hk, run));
    }

    /** The whole document's sum for run {@code r}: the all-reduced one if it straddles, else its own. */
    private static INDArray state(INDArray total, INDArray[][][] own, int i, int hk, int r, Run run) {
        return run.slot < 0 ? own[i][hk][r]
                : total.get(NDArrayIndex.point(i), NDArrayIndex.point(hk), NDArrayIndex.point(run.slot));
    }

    /** The documents that straddle a shard boundary, numbered per sequence; every member counts the same. */
    private Map<Integer, Integer> straddling(int i, int n) {
        Map<Integer, Integer> slot = new HashMap<>();
        for (int j = 1; j < comm.group().size(); j++) {
            int p = j * n;
            if (docs.continues(i, p)) {
                slot.putIfAbsent(docs.start(i, p), slot.size());
            }
        }
        return slot;
    }

    private int slots() {
        int n = docs.length() / comm.group().size();
        int most = 0;
        for (int i = 0; i < docs.batch(); i++) {
            most = Math.max(most, straddling(i, n).size());
        }
        return most;
    }

    private List<List<Run>> runs(int b, int n) {
        int first = comm.group().index() * n;
        List<List<Run>> all = new ArrayList<>();
        for (int i = 0; i < b; i++) {
            Map<Integer, Integer> slot = straddling(i, n);
            List<Run> runs = new ArrayList<>();
            int from = 0;
            for (int t = 1; t <= n; t++) {
                if (t == n || docs.id(i, first + t) != docs.id(i, first + from)) {
                    int p = first + from;
                    boolean padding = docs.isPadding(i, p);
                    runs.add(new Run(from, t, padding, padding ? -1 : slot.getOrDefault(docs.start(i, p), -1)));
                    from = t;
                }
            }
            all.add(runs);
        }
        return all;
    }

    /** Rows {@code [from, to)} of head {@code h} of sequence {@code i}: a {@code [len, D]} view. */
    private static INDArray rows(INDArray a, int i, int h, Run run) {
        return a.get(NDArrayIndex.point(i), NDArrayIndex.point(h), NDArrayIndex.interval(run.from, run.to),
                NDArrayIndex.all());
    }
}
