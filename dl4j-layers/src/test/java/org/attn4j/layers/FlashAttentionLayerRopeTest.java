package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.attn4j.ops.testing.ReferenceAttention;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * {@link FlashAttentionLayer} with rotary position embedding: the output equals attention by the definition after
 * rotating q and k pair by pair (as complex numbers, angles {@code p * theta^(-2i/r)}); key/value-cached decoding
 * equals the full pass; dynamic scaling changes nothing up to {@code maxPositions} and acts as a larger theta beyond.
 */
class FlashAttentionLayerRopeTest {

    private static final int N_IN = 5;
    private static final int MB = 2;
    private static final int N = 9;
    private static final int HEADS = 2;
    private static final int KV_HEADS = 1;
    private static final int HEAD_SIZE = 8;

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    private static FlashAttentionLayer layer(RotaryEmbedding rope) {
        return LayerTestSupport.attention(N_IN, HEADS * HEAD_SIZE, HEADS).nKvHeads(KV_HEADS).causal(true)
                .rope(rope).build();
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RotaryEmbedding.Layout.class)
    void matchesAttentionOfPairwiseRotatedQueriesAndKeys(RotaryEmbedding.Layout layout) {
        double theta = 50;
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(theta).partialRotaryFactor(0.5).layout(layout).build();
        MultiLayerNetwork net = LayerTestSupport.alone(layer(rope), DataType.DOUBLE, SEED);
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.DOUBLE, RNNFormat.NCW, MB, N_IN, N);
        INDArray actual = net.output(x);

        NaiveMath.Projections p = NaiveMath.Projections.of(net);
        int rotary = HEAD_SIZE / 2;
        double[][][] q = new double[MB][][];
        double[][][] k = new double[MB][][];
        double[][][] v = new double[MB][][];
        for (int b = 0; b < MB; b++) {
            double[][] xs = NaiveMath.steps(x, RNNFormat.NCW, b);
            q[b] = rotated(NaiveMath.affine(xs, p.wq(), p.bq()), HEADS, rotary, theta, layout);
            k[b] = rotated(NaiveMath.affine(xs, p.wk(), p.bk()), KV_HEADS, rotary, theta, layout);
            v[b] = NaiveMath.affine(xs, p.wv(), p.bv());
        }
        INDArray o = new ReferenceAttention(NaiveMath.heads(q, HEADS, HEAD_SIZE), NaiveMath.heads(k, KV_HEADS,
                HEAD_SIZE), NaiveMath.heads(v, KV_HEADS, HEAD_SIZE), null, AttentionMask.builder().causal(true).build(),
                1 / Math.sqrt(HEAD_SIZE)).output();
        double[][][] expected = new double[MB][][];
        for (int b = 0; b < MB; b++) {
            expected[b] = NaiveMath.affine(NaiveMath.merged(o, b), p.wo(), p.bo());
        }
        NaiveMath.assertMatches(expected, actual, RNNFormat.NCW, 1e-10, layout + " RoPE");
    }

    /**
     * Each head's first {@code rotary} features of each step turned pair by pair as complex numbers
     * {@code (a + ib) e^(i t w)}, {@code w = theta^(-2j/rotary)}; the pair is {@code (j, j + rotary/2)} or
     * {@code (2j, 2j+1)}.
     */
    private static double[][] rotated(double[][] rows, int heads, int rotary, double theta,
                                      RotaryEmbedding.Layout layout) {
        double[][] out = new double[rows.length][];
        for (int t = 0; t < rows.length; t++) {
            out[t] = rows[t].clone();
            for (int h = 0; h < heads; h++) {
                for (int j = 0; j < rotary / 2; j++) {
                    int re = h * HEAD_SIZE + (layout == RotaryEmbedding.Layout.HALF ? j : 2 * j);
                    int im = h * HEAD_SIZE + (layout == RotaryEmbedding.Layout.HALF ? j + rotary / 2 : 2 * j + 1);
                    double angle = t * Math.pow(theta, -2.0 * j / rotary);
                    double a = rows[t][re];
                    double b = rows[t][im];
                    out[t][re] = a * Math.cos(angle) - b * Math.sin(angle);
                    out[t][im] = a * Math.sin(angle) + b * Math.cos(angle);
                }
            }
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(value = RotaryEmbedding.Scaling.class, names = {"DEFAULT", "LINEAR", "LLAMA3", "YARN"})
    void cachedDecodingEqualsTheFullPass(RotaryEmbedding.Scaling scaling) {
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(30).scaling(scaling, scaling == RotaryEmbedding
                .Scaling.DEFAULT ? 1 : 3).originalMaxPositions(4).build();
        MultiLayerNetwork net = LayerTestSupport.alone(layer(rope), DataType.DOUBLE, SEED + 1);
        INDArray x = LayerTestSupport.features(new Random(SEED + 1), DataType.DOUBLE, RNNFormat.NCW, MB, N_IN, N);
        INDArray full = net.output(x);
        net.rnnClearPreviousState();
        INDArray prompt = net.rnnTimeStep(x.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(0, 4))
                .dup());
        assertClose(full.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(0, 4)), prompt,
                scaling + " prompt");
        for (int t = 4; t < N; t++) {
            INDArray step = net.rnnTimeStep(x.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(t,
                    t + 1)).dup());
            assertClose(full.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(t, t + 1)), step,
                    scaling + " step " + t);
        }
    }

    @Test
    void dynamicScalingIsTheDefaultUpToMaxPositionsAndALargerThetaBeyond() {
        double theta = 40;
        double factor = 2;
        INDArray x = LayerTestSupport.features(new Random(SEED + 2), DataType.DOUBLE, RNNFormat.NCW, MB, N_IN, N);
        RotaryEmbedding dynamicWide = RotaryEmbedding.builder().theta(theta)
                .scaling(RotaryEmbedding.Scaling.DYNAMIC, factor).maxPositions(N).build();
        assertClose(output(RotaryEmbedding.of(theta), x), output(dynamicWide, x), "N = maxPositions");

        int max = 3;
        RotaryEmbedding dynamic = RotaryEmbedding.builder().theta(theta)
                .scaling(RotaryEmbedding.Scaling.DYNAMIC, factor).maxPositions(max).build();
        // NTK-aware: theta * (factor * N / max - (factor - 1))^(r / (r - 2))
        double grown = theta * Math.pow(factor * N / max - (factor - 1), HEAD_SIZE / (HEAD_SIZE - 2.0));
        assertClose(output(RotaryEmbedding.of(grown), x), output(dynamic, x), "N = 3 maxPositions");
    }

    /**
     * Positions restarting per packed document: each document then turns exactly as it would alone, also under
     * dynamic scaling, whose sequence length is the longest document's (running on, it would be the packed length).
     */
    @Test
    void restartingPositionsMakeEachPackedDocumentTurnAsItWouldAlone() {
        RotaryEmbedding dynamic = RotaryEmbedding.builder().theta(40)
                .scaling(RotaryEmbedding.Scaling.DYNAMIC, 3).maxPositions(2).build();
        INDArray x = LayerTestSupport.features(new Random(SEED + 3), DataType.DOUBLE, RNNFormat.NCW, 1, N_IN, 8);
        org.attn4j.ops.Documents docs = org.attn4j.ops.Documents.of(new int[][] {{0, 0, 0, 0, 1, 1, 1, 2}});
        INDArray[] packed = new INDArray[2];
        for (int restart = 0; restart < 2; restart++) {
            MultiLayerNetwork net = LayerTestSupport.alone(LayerTestSupport.attention(N_IN, HEADS * HEAD_SIZE, HEADS)
                    .nKvHeads(KV_HEADS).causal(true).rope(dynamic).ropeRestartsPerDocument(restart == 1).build(),
                    DataType.DOUBLE, SEED + 3);
            try (PackedSequences.Scope s = PackedSequences.enter(docs)) {
                packed[restart] = net.output(x);
            }
        }
        // the first document, 4 steps, is the longest: alone it grows dynamic's theta as much as packed
        MultiLayerNetwork alone = LayerTestSupport.alone(LayerTestSupport.attention(N_IN, HEADS * HEAD_SIZE, HEADS)
                .nKvHeads(KV_HEADS).causal(true).rope(dynamic).build(), DataType.DOUBLE, SEED + 3);
        INDArray first = x.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.interval(0, 4)).dup();
        assertClose(alone.output(first), packed[1].get(NDArrayIndex.all(), NDArrayIndex.all(),
                NDArrayIndex.interval(0, 4)), "the first document, restarting");
        double apart = packed[0].sub(packed[1]).amaxNumber().doubleValue();
        assertTrue(apart > 1e-6, "running on, dynamic scaling reads the packed length 8: the outputs differ by "
                + apart);
    }

    private static INDArray output(RotaryEmbedding rope, INDArray x) {
        return LayerTestSupport.alone(layer(rope), DataType.DOUBLE, SEED + 2).output(x);
    }

    private static void assertClose(INDArray expected, INDArray actual, String what) {
        double err = expected.sub(actual).amaxNumber().doubleValue() / expected.amaxNumber().doubleValue();
        assertTrue(err <= 1e-12, what + ": relative difference " + err);
    }
}
