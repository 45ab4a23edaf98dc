package org.attn4j.ops.rope;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The frequencies of every scaling at chosen pairs, worked out from the definitions in transformers'
 * {@code modeling_rope_utils} (Llama 3.1's and YaRN's regions checked one pair at a time), and the rotation's
 * properties: scores depend on the distance only, the backward pass inverts the forward, unrotated features pass.
 */
class RotaryEmbeddingTest {

    private static final double TOL = 1e-15;

    @Test
    void defaultFrequenciesArePowersOfThetaOverTheRotatingFeatures() {
        double[] inv = RotaryEmbedding.of(10000).inverseFrequencies(64, 100);
        assertEquals(32, inv.length);
        assertEquals(1.0, inv[0], TOL);
        assertEquals(Math.pow(10000, -2.0 * 7 / 64), inv[7], TOL);
        double[] partial = RotaryEmbedding.builder().theta(10000).partialRotaryFactor(0.25).build()
                .inverseFrequencies(64, 100);
        assertEquals(8, partial.length, "a quarter of 64 features rotate: 8 pairs");
        assertEquals(Math.pow(10000, -2.0 * 3 / 16), partial[3], TOL);
    }

    @Test
    void linearScalingDividesEveryFrequency() {
        double[] plain = RotaryEmbedding.of(500).inverseFrequencies(16, 10);
        double[] linear = RotaryEmbedding.builder().theta(500).scaling(RotaryEmbedding.Scaling.LINEAR, 4).build()
                .inverseFrequencies(16, 10);
        for (int i = 0; i < plain.length; i++) {
            assertEquals(plain[i] / 4, linear[i], TOL);
        }
    }

    @Test
    void dynamicScalingGrowsThetaOnlyBeyondMaxPositions() {
        RotaryEmbedding dynamic = RotaryEmbedding.builder().theta(10000)
                .scaling(RotaryEmbedding.Scaling.DYNAMIC, 2).maxPositions(1024).build();
        double[] plain = RotaryEmbedding.of(10000).inverseFrequencies(32, 1024);
        double[] within = dynamic.inverseFrequencies(32, 1000);
        for (int i = 0; i < plain.length; i++) {
            assertEquals(plain[i], within[i], TOL, "up to maxPositions nothing changes");
        }
        double base = 10000 * Math.pow(2.0 * 4096 / 1024 - 1, 32.0 / 30);
        double[] beyond = dynamic.inverseFrequencies(32, 4096);
        assertEquals(Math.pow(base, -2.0 * 5 / 32), beyond[5], TOL);
    }

    /**
     * Llama 3.1's setting (theta 500000, factor 8, low 1, high 4, original 8192; 128 features): pair 0 turns every
     * 2 pi steps (shorter than 8192 / 4) and stays; pair 63 turns once in 2.6 million steps (longer than 8192) and is
     * divided by 8; pair 32 turns every 4443 steps, between the two, and is interpolated.
     */
    @Test
    void llama3ScalingKeepsHighDividesLowAndInterpolatesBetween() {
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(500000).scaling(RotaryEmbedding.Scaling.LLAMA3, 8)
                .originalMaxPositions(8192).llama3(1, 4).build();
        double[] inv = rope.inverseFrequencies(128, 10);
        double[] plain = RotaryEmbedding.of(500000).inverseFrequencies(128, 10);
        assertEquals(plain[0], inv[0], TOL);
        assertEquals(plain[63] / 8, inv[63], TOL);
        double wavelength = 2 * Math.PI / plain[32];
        assertTrue(wavelength > 8192 / 4.0 && wavelength < 8192, "pair 32 is in the middle region: " + wavelength);
        double smooth = (8192 / wavelength - 1) / (4 - 1);
        assertEquals((1 - smooth) * plain[32] / 8 + smooth * plain[32], inv[32], TOL);
        assertEquals(1.0, rope.cosSinFactor());
    }

    /**
     * YaRN with theta 10000, 64 features, factor 4, original 2048, betas 32 and 1: pairs below
     * {@code floor(64 ln(2048 / (32 * 2 pi)) / (2 ln 10000))} keep their frequency, pairs from
     * {@code ceil(64 ln(2048 / (2 pi)) / (2 ln 10000))} on are divided by 4, a linear ramp between; cos and sin carry
     * {@code 0.1 ln 4 + 1}.
     */
    @Test
    void yarnRampsFromExtrapolationToInterpolationAndScalesCosAndSin() {
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(10000).scaling(RotaryEmbedding.Scaling.YARN, 4)
                .originalMaxPositions(2048).build();
        double[] inv = rope.inverseFrequencies(64, 10);
        double[] plain = RotaryEmbedding.of(10000).inverseFrequencies(64, 10);
        double low = Math.floor(64 * Math.log(2048 / (32 * 2 * Math.PI)) / (2 * Math.log(10000)));
        double high = Math.ceil(64 * Math.log(2048 / (1 * 2 * Math.PI)) / (2 * Math.log(10000)));
        assertEquals(8.0, low);
        assertEquals(21.0, high);
        assertEquals(plain[2], inv[2], TOL);
        assertEquals(plain[25] / 4, inv[25], TOL);
        double ramp = (12 - low) / (high - low);
        assertEquals(plain[12] / 4 * ramp + plain[12] * (1 - ramp), inv[12], TOL);
        assertEquals(0.1 * Math.log(4) + 1, rope.cosSinFactor(), TOL);
        RotaryEmbedding mscale = rope.toBuilder().mscale(1.0, 0.5).build();
        assertEquals((0.1 * Math.log(4) + 1) / (0.05 * Math.log(4) + 1), mscale.cosSinFactor(), TOL);
        assertEquals(1.5, rope.toBuilder().attentionFactor(1.5).build().cosSinFactor());
    }

    /** As transformers holds them in a bfloat16 model: float32 rounded to 8 significant bits, ties to even. */
    @Test
    void frequenciesHeldInBfloat16AreRoundedAsTransformersHoldsThem() {
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(1e6)
                .frequencyPrecision(RotaryEmbedding.FrequencyPrecision.BFLOAT16).build();
        double[] exact = RotaryEmbedding.of(1e6).inverseFrequencies(16, 10);
        double[] held = rope.inverseFrequencies(16, 10);
        for (int i = 0; i < exact.length; i++) {
            int bits = Float.floatToRawIntBits((float) exact[i]);
            int lower = bits & 0xffff;
            int upper = bits >>> 16;
            if (lower > 0x8000 || (lower == 0x8000 && (upper & 1) == 1)) {
                upper++;
            }
            assertEquals(Float.intBitsToFloat(upper << 16), held[i], 0.0, "pair " + i);
        }
        assertTrue(Math.abs(held[1] - exact[1]) > 1e-6, "the rounding is visible: " + held[1] + " " + exact[1]);
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(RotaryEmbedding.Layout.class)
    void scoresDependOnTheDistanceOnlyAndTheBackwardPassInverts(RotaryEmbedding.Layout layout) {
        Nd4j.getRandom().setSeed(7);
        RotaryEmbedding rope = RotaryEmbedding.builder().theta(100).partialRotaryFactor(0.75).layout(layout).build();
        INDArray q = Nd4j.randn(DataType.DOUBLE, 1, 1, 1, 8);
        INDArray k = Nd4j.randn(DataType.DOUBLE, 1, 1, 1, 8);
        double first = score(rope, q, 3, k, 1);
        assertEquals(first, score(rope, q, 13, k, 11), 1e-12, "the same distance, shifted by 10");
        assertTrue(Math.abs(first - score(rope, q, 4, k, 1)) > 1e-6, "another distance scores otherwise");

        INDArray x = Nd4j.randn(DataType.DOUBLE, 2, 3, 5, 8);
        RotaryEmbedding.Table table = rope.table(8, new int[][] {{0, 4, 9, 2, 7}, {1, 1, 3, 8, 6}}, 10);
        INDArray y = rope.rotate(x, table);
        assertEquals(0, x.get(org.nd4j.linalg.indexing.NDArrayIndex.all(), org.nd4j.linalg.indexing.NDArrayIndex
                .all(), org.nd4j.linalg.indexing.NDArrayIndex.all(), org.nd4j.linalg.indexing.NDArrayIndex
                .interval(6, 8)).sub(y.get(org.nd4j.linalg.indexing.NDArrayIndex.all(),
                org.nd4j.linalg.indexing.NDArrayIndex.all(), org.nd4j.linalg.indexing.NDArrayIndex.all(),
                org.nd4j.linalg.indexing.NDArrayIndex.interval(6, 8))).amaxNumber().doubleValue(),
                "features beyond the rotating 6 pass unchanged");
        assertEquals(0, rope.rotateBack(y, table).sub(x).amaxNumber().doubleValue(), 1e-14);
        assertEquals(x.norm2Number().doubleValue(), y.norm2Number().doubleValue(), 1e-12, "a rotation keeps length");
    }

    private static double score(RotaryEmbedding rope, INDArray q, int qPosition, INDArray k, int kPosition) {
        INDArray rq = rope.rotate(q, rope.table(8, new int[][] {{qPosition}}, 20));
        INDArray rk = rope.rotate(k, rope.table(8, new int[][] {{kPosition}}, 20));
        return rq.mul(rk).sumNumber().doubleValue();
    }

    @Test
    void settingsThatCannotRotateAreRefusedNamingThem() {
        IllegalArgumentException odd = assertThrows(IllegalArgumentException.class,
                () -> RotaryEmbedding.builder().partialRotaryFactor(0.5).build().rotaryDims(6));
        assertTrue(odd.getMessage().contains("rotates 3 features"), odd.getMessage());
        IllegalArgumentException yarn = assertThrows(IllegalArgumentException.class,
                () -> RotaryEmbedding.builder().scaling(RotaryEmbedding.Scaling.YARN, 4).build());
        assertTrue(yarn.getMessage().contains("originalMaxPositions"), yarn.getMessage());
        IllegalArgumentException type = assertThrows(IllegalArgumentException.class,
                () -> RotaryEmbedding.Scaling.ofHfName("longrope"));
        assertTrue(type.getMessage().contains("got longrope"), type.getMessage());
    }
}
