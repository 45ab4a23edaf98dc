package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.testing.Ranks;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** LASP on P in-JVM workers equals single-device linear attention on the same seeded inputs. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LaspAttentionTest {

    static Stream<Arguments> cases() {
        List<Arguments> a = new ArrayList<>();
        for (int p : new int[] {1, 2, 3, 4, 6, 8, 9}) {
            a.add(Arguments.of(p, true, DataType.DOUBLE, p % 2 == 0 ? 2 : 4));
            a.add(Arguments.of(p, false, DataType.DOUBLE, p % 2 == 0 ? 4 : 2));
        }
        a.add(Arguments.of(4, true, DataType.FLOAT, 2));
        a.add(Arguments.of(3, false, DataType.FLOAT, 4));
        return a.stream();
    }

    @ParameterizedTest(name = "P={0} causal={1} {2} Hkv={3}")
    @MethodSource("cases")
    void matchesSingleDeviceLinearAttention(int p, boolean causal, DataType type, int hkv) throws Exception {
        int n = 144;
        long seed = 10L * p + (causal ? 1 : 0);
        Decay decay = causal ? Decay.perHead(0.9, 0.95, 0.99, 1.0) : Decay.none();
        INDArray q = randn(seed, type, 2, 4, n, 8);
        INDArray k = randn(seed + 1, type, 2, hkv, n, 8);
        INDArray v = randn(seed + 2, type, 2, hkv, n, 8);
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

    @ParameterizedTest(name = "W={0} T={1}")
    @CsvSource({"4, 2", "6, 3", "6, 2", "8, 4"})
    void dataSequenceHybridEqualsSingleDeviceForEveryBatchSlice(int w, int t) throws Exception {
        int groups = w / t;
        int n = 48;
        long seed = 7L * w + t;
        Decay decay = Decay.perHead(0.9, 0.95, 0.99, 1.0);
        INDArray q = randn(seed, DataType.DOUBLE, groups, 4, n, 8);
        INDArray k = randn(seed + 1, DataType.DOUBLE, groups, 2, n, 8);
        INDArray v = randn(seed + 2, DataType.DOUBLE, groups, 2, n, 8);
        INDArray g = randn(seed + 3, DataType.DOUBLE, groups, 4, n, 8);
        LinearAttention op = LinearAttention.defaults();
        LinearAttentionOutput whole = op.forward(q, k, v, decay, true, null);
        LinearAttentionGradients wholeGrad = op.backward(q, k, v, decay, true, null, g, null, whole.cache());
        SequenceLayout layout = SequenceLayout.CONTIGUOUS;
        INDArray[][] parts = SequenceTesting.onRanks(w, tr -> {
            LaspAttention lasp = LaspAttention.hybrid(tr, t, decay, true);
            int slice = tr.rank() / t;
            int r = tr.rank() % t;
            INDArray lq = layout.shard(batch(q, slice), r, t);
            INDArray lk = layout.shard(batch(k, slice), r, t);
            INDArray lv = layout.shard(batch(v, slice), r, t);
            LaspAttention.Forward f = lasp.forward(lq, lk, lv);
            LinearAttentionGradients lg = lasp.backward(lq, lk, lv, f, layout.shard(batch(g, slice), r, t));
            return new INDArray[] {f.output(), lg.dq(), lg.dk(), lg.dv()};
        });
        INDArray[] expected = {whole.output(), wholeGrad.dq(), wholeGrad.dk(), wholeGrad.dv()};
        String[] names = {"O", "dQ", "dK", "dV"};
        for (int j = 0; j < groups; j++) {
            for (int i = 0; i < names.length; i++) {
                INDArray[] mine = java.util.Arrays.copyOfRange(parts[i], j * t, (j + 1) * t);
                assertClose(names[i], layout.unshard(mine), batch(expected[i], j), 1e-12,
                        "W=" + w + " T=" + t + " batch slice " + j);
            }
        }
    }

    @Test
    void hybridRefusesASequenceParallelSizeThatDoesNotDivideTheWorld() {
        try (Ranks ranks = Ranks.inJvm(6, java.time.Duration.ofSeconds(5))) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> LaspAttention.hybrid(ranks.transport(0), 4, Decay.none(), false));
            assertTrue(e.getMessage().contains("T = 4") && e.getMessage().contains("W = 6"), e.getMessage());
        }
    }

    private static INDArray batch(INDArray x, int i) {
        return x.get(NDArrayIndex.interval(i, i + 1), NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.all())
                .dup('c');
    }
}
