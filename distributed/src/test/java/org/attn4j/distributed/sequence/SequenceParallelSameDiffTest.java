package org.attn4j.distributed.sequence;

import static org.attn4j.distributed.sequence.SequenceTesting.assertClose;
import static org.attn4j.distributed.sequence.SequenceTesting.randn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.ops.SequenceParallelAttention;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.attn4j.ops.samediff.SDAttention;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.validation.GradCheckUtil;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * {@link SDAttention#sequenceParallel} inside SameDiff graphs, one per rank: the rows of O and the gradients
 * SameDiff computes equal single-device attention on the same seeded inputs (float64, 1e-12), for every algorithm;
 * finite differences agree on one rank; a saved graph runs again once bound to an algorithm.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SequenceParallelSameDiffTest {

    private static final int N = 32;
    private static final double SCALE = 0.3;

    /** One rank's graph: q, k, v shard variables, the function, loss {@code sum(O * g)}. */
    private static INDArray[] rankGraph(SequenceParallelAttention<?> algorithm, INDArray q, INDArray k, INDArray v,
                                        INDArray g) {
        SameDiff sd = SameDiff.create();
        SDVariable out = SDAttention.sequenceParallel(sd.var("q", q), sd.var("k", k), sd.var("v", v), algorithm)
                .scale(SCALE).build("o");
        out.mul(sd.constant(g)).sum().rename("loss").markAsLoss();
        INDArray o = sd.output(Collections.emptyMap(), "o").get("o");
        Map<String, INDArray> grads = sd.calculateGradients(Collections.emptyMap(), "q", "k", "v");
        return new INDArray[] {o, grads.get("q"), grads.get("k"), grads.get("v")};
    }

    @ParameterizedTest
    @MethodSource("org.attn4j.distributed.sequence.SequenceTesting#algorithms")
    void sameDiffGraphsOnEveryRankEqualSingleDeviceAttention(SequenceAlgorithm algorithm) throws Exception {
        int p = 4;
        long heads = 4;
        long kvHeads = algorithm == SequenceAlgorithm.byName("ulysses") ? 4 : 2;
        SequenceAlgorithm.Settings plain = SequenceAlgorithm.Settings.of(p, N, true).withHeads(heads, kvHeads);
        SequenceAlgorithm.Settings s = algorithm.name().equals("wallfacer") ? plain.withOption("team", 2)
                : algorithm.name().equals("lasp") ? plain.withOption("decay", 0.9) : plain;
        SequenceLayout layout = algorithm.layout(s);
        long seed = 40 + SequenceAlgorithm.all().indexOf(algorithm);
        INDArray q = randn(seed, DataType.DOUBLE, 2, heads, N, 8);
        INDArray k = randn(seed + 1, DataType.DOUBLE, 2, kvHeads, N, 8);
        INDArray v = randn(seed + 2, DataType.DOUBLE, 2, kvHeads, N, 8);
        INDArray g = randn(seed + 3, DataType.DOUBLE, 2, heads, N, 8);

        INDArray[] expected;
        if (algorithm == SequenceAlgorithm.byName("lasp")) {      // linear attention on scaled queries
            LinearAttention op = LinearAttention.defaults();
            INDArray qs = q.mul(SCALE);
            LinearAttentionOutput f = op.forward(qs, k, v, Decay.of(0.9), true, null);
            LinearAttentionGradients d = op.backward(qs, k, v, Decay.of(0.9), true, null, g, null, f.cache());
            expected = new INDArray[] {f.output(), d.dq().mul(SCALE), d.dk(), d.dv()};
        } else {
            FlashAttention op = FlashAttention.defaults();
            AttentionOutput f = op.forward(q, k, v, AttentionMask.causal(), SCALE);
            AttentionGradients d = op.backward(q, k, v, f.output(), f.lse(), g, AttentionMask.causal(), SCALE);
            expected = new INDArray[] {f.output(), d.dq(), d.dk(), d.dv()};
        }

        INDArray[][] parts = SequenceTesting.onRanks(p, t -> {
            int r = t.rank();
            return rankGraph(algorithm.create(t, s), layout.shard(q, r, p), layout.shard(k, r, p),
                    layout.shard(v, r, p), layout.shard(g, r, p));
        });
        String ctx = algorithm + " P=" + p + " seed " + seed;
        String[] names = {"O", "dQ", "dK", "dV"};
        for (int i = 0; i < names.length; i++) {
            assertClose(names[i], layout.unshard(parts[i]), expected[i], 1e-12, ctx);
        }
    }

    /**
     * RoPE in the sequence-parallel function: each rank rotates its shard's q and k at their global positions (the
     * layout's), with the whole length for dynamic scaling; O and the gradients equal single-device attention on q
     * and k rotated whole (the gradients rotated back), for every softmax algorithm.
     */
    @ParameterizedTest
    @MethodSource("org.attn4j.distributed.sequence.SequenceTesting#softmaxAlgorithms")
    void withRopeAtGlobalPositionsEveryRankEqualsSingleDeviceAttention(SequenceAlgorithm algorithm) throws Exception {
        int p = 4;
        long heads = 4;
        long kvHeads = algorithm == SequenceAlgorithm.byName("ulysses") ? 4 : 2;
        SequenceAlgorithm.Settings plain = SequenceAlgorithm.Settings.of(p, N, true).withHeads(heads, kvHeads);
        SequenceAlgorithm.Settings s = algorithm.name().equals("wallfacer") ? plain.withOption("team", 2) : plain;
        SequenceLayout layout = algorithm.layout(s);
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(50).scaling(RotaryEmbedding.Scaling.DYNAMIC, 2)
                .maxPositions(16).build();
        long seed = 60 + SequenceAlgorithm.all().indexOf(algorithm);
        INDArray q = randn(seed, DataType.DOUBLE, 2, heads, N, 8);
        INDArray k = randn(seed + 1, DataType.DOUBLE, 2, kvHeads, N, 8);
        INDArray v = randn(seed + 2, DataType.DOUBLE, 2, kvHeads, N, 8);
        INDArray g = randn(seed + 3, DataType.DOUBLE, 2, heads, N, 8);
        RotaryEmbedding.Table t = rope.table(8, new int[][] {IntStream.range(0, N).toArray()}, N);
        INDArray qr = rope.rotate(q, t);
        INDArray kr = rope.rotate(k, t);
        FlashAttention op = FlashAttention.defaults();
        AttentionOutput f = op.forward(qr, kr, v, AttentionMask.causal(), SCALE);
        AttentionGradients d = op.backward(qr, kr, v, f.output(), f.lse(), g, AttentionMask.causal(), SCALE);
        INDArray[] expected = {f.output(), rope.rotateBack(d.dq(), t), rope.rotateBack(d.dk(), t), d.dv()};

        INDArray[][] parts = SequenceTesting.onRanks(p, tr -> {
            int r = tr.rank();
            SameDiff sd = SameDiff.create();
            SDVariable out = SDAttention.sequenceParallel(sd.var("q", layout.shard(q, r, p)),
                    sd.var("k", layout.shard(k, r, p)), sd.var("v", layout.shard(v, r, p)), algorithm.create(tr, s))
                    .scale(SCALE).rope(rope, sd.constant(Nd4j.createFromArray(layout.positions(r, p, N))), N)
                    .build("o");
            out.mul(sd.constant(layout.shard(g, r, p))).sum().rename("loss").markAsLoss();
            INDArray o = sd.output(Collections.emptyMap(), "o").get("o");
            Map<String, INDArray> grads = sd.calculateGradients(Collections.emptyMap(), "q", "k", "v");
            return new INDArray[] {o, grads.get("q"), grads.get("k"), grads.get("v")};
        });
        String ctx = algorithm + " P=" + p + " with " + rope;
        String[] names = {"O", "dQ", "dK", "dV"};
        for (int i = 0; i < names.length; i++) {
            assertClose(names[i], layout.unshard(parts[i]), expected[i], 1e-12, ctx);
        }
    }

    /** Finite differences through the whole sequence-parallel path (op, binding, algorithm) on one rank. */
    @Test
    void oneRankGradientsMatchFiniteDifferences() throws Exception {
        DataType saved = Nd4j.dataType();
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        try {
            for (SequenceAlgorithm algorithm : List.of(SequenceAlgorithm.byName("ring"), SequenceAlgorithm.byName("lasp"))) {
                InJvmTransport t = InJvmTransport.group(1, Duration.ofSeconds(20)).get(0);
                try {
                    SequenceAlgorithm.Settings s = SequenceAlgorithm.Settings.of(1, 6, true).withHeads(2, 1);
                    SameDiff sd = SameDiff.create();
                    SDVariable out = SDAttention.sequenceParallel(sd.var("q", randn(1, DataType.DOUBLE, 1, 2, 6, 3)),
                            sd.var("k", randn(2, DataType.DOUBLE, 1, 1, 6, 3)),
                            sd.var("v", randn(3, DataType.DOUBLE, 1, 1, 6, 3)), algorithm.create(t, s)).build("o");
                    out.mul(sd.constant(randn(4, DataType.DOUBLE, 1, 2, 6, 3))).sum().rename("loss").markAsLoss();
                    assertTrue(GradCheckUtil.checkGradients(sd, Collections.emptyMap(), 1e-6, 1e-5, 1e-9, false,
                            false), algorithm + ": SameDiff gradients differ from finite differences");
                } finally {
                    t.close();
                }
            }
        } finally {
            Nd4j.setDefaultDataTypes(saved, saved);
        }
    }

    @Test
    void savedGraphRunsAgainOnceBound(@TempDir Path dir) throws Exception {
        InJvmTransport t = InJvmTransport.group(1, Duration.ofSeconds(20)).get(0);
        try {
            SequenceAlgorithm.Settings s = SequenceAlgorithm.Settings.of(1, 8, true).withHeads(2, 2);
            SameDiff sd = SameDiff.create();
            SDAttention.sequenceParallel(sd.var("q", randn(5, DataType.DOUBLE, 1, 2, 8, 4)),
                    sd.var("k", randn(6, DataType.DOUBLE, 1, 2, 8, 4)),
                    sd.var("v", randn(7, DataType.DOUBLE, 1, 2, 8, 4)), SequenceAlgorithm.byName("ring").create(t, s)).build("o");
            INDArray before = sd.output(Collections.emptyMap(), "o").get("o");
            File file = dir.resolve("sp.fb").toFile();
            sd.save(file, false);
            SameDiff loaded = SDAttention.load(file, false);
            assertEquals(1, SDAttention.bind(loaded, SequenceAlgorithm.byName("ring").create(t, s)));
            assertEquals(before, loaded.output(Collections.emptyMap(), "o").get("o"));
        } finally {
            t.close();
        }
    }
}
