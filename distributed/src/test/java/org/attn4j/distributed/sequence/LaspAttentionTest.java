package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/** LASP on P in-JVM workers equals single-device linear attention on the same seeded inputs. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LaspAttentionTest {

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (int p = 1; p <= 4; p++) {
            a.add(Arguments.of(p, true, DataType.DOUBLE));
            a.add(Arguments.of(p, false, DataType.DOUBLE));
        }
        a.add(Arguments.of(4, true, DataType.FLOAT));
        a.add(Arguments.of(3, false, DataType.FLOAT));
        return a.stream();
    }

    @ParameterizedTest(name = "P={0} causal={1} {2}")
    @MethodSource("cases")
    void matchesSingleDeviceLinearAttention(int p, boolean causal, DataType type) throws Exception {
        int n = 96;
        long seed = 10L * p + (causal ? 1 : 0);
        Decay decay = causal ? Decay.perHead(0.9, 0.95, 0.99, 1.0) : Decay.none();
        INDArray q = randn(seed, type, 2, 4, n, 8);
        INDArray k = randn(seed + 1, type, 2, 2, n, 8);
        INDArray v = randn(seed + 2, type, 2, 2, n, 8);
        INDArray g = randn(seed + 3, type, 2, 4, n, 8);
        LinearAttention op = LinearAttention.defaults();
        LinearAttentionOutput whole = op.forward(q, k, v, decay, causal, null);
        LinearAttentionGradients wholeGrad = op.backward(q, k, v, decay, causal, null, g, null, whole.cache());

        SequenceLayout layout = SequenceLayout.CONTIGUOUS;
        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            LaspAttention lasp = new LaspAttention(Communicator.world(t), decay, causal);
            int r = t.rank();
            INDArray lq = layout.shard(q, r, p);
            INDArray lk = layout.shard(k, r, p);
            INDArray lv = layout.shard(v, r, p);
            LaspAttention.Forward f = lasp.forward(lq, lk, lv);
            LinearAttentionGradients lg = lasp.backward(lq, lk, lv, f, layout.shard(g, r, p));
            return new INDArray[] {f.output(), lg.dq(), lg.dk(), lg.dv()};
        });
        double tol = type == DataType.DOUBLE ? 1e-12 : 1e-5;
        String ctx = "P=" + p + " causal=" + causal + " " + type + " seed " + seed;
        assertClose("O", layout.unshard(parts[0]), whole.output(), tol, ctx);
        assertClose("dQ", layout.unshard(parts[1]), wholeGrad.dq(), tol, ctx);
        assertClose("dK", layout.unshard(parts[2]), wholeGrad.dk(), tol, ctx);
        assertClose("dV", layout.unshard(parts[3]), wholeGrad.dv(), tol, ctx);
    }
}
