package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.SplittableRandom;

import org.attn4j.ops.Documents;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * Every JNI entry point of the native tile code (products, packing, the interval step, the softmax steps, row
 * scaling), driven through the flash op's forward and backward passes in every tile path (native, Java, ND4J
 * masks with native products, which run ND4J operations on the op's worker threads) on random odd shapes: lengths that are no
 * multiple of a tile or of the 32-row panel, head widths from 1 to 129, tiles from 1 row, every mask kind. Each case
 * is held against the float64 reference, so a read or write past a tile shows as a wrong value or a crash.
 *
 * <p>{@code -Dattn4j.stressCases=N} runs N cases instead of the suite's few (run it under {@code -Xcheck:jni} to
 * have the JVM check each native call too); {@code -Dattn4j.stressSeed=S} picks another sequence of cases.
 */
class NativeTileStressTest {

    private static final int[] WIDTHS = {1, 2, 3, 5, 8, 15, 16, 17, 31, 32, 33, 47, 64, 65, 96, 127, 128, 129};

    @Test
    void randomOddShapesMatchTheReferenceThroughEveryNativeEntryPoint() {
        assumeTrue(NativeTileMath.UNAVAILABLE == null, String.valueOf(NativeTileMath.UNAVAILABLE));
        int cases = Integer.getInteger("attn4j.stressCases", 3);
        long seed = Long.getLong("attn4j.stressSeed", 20261127L);
        SplittableRandom random = new SplittableRandom(seed);
        for (int c = 0; c < cases; c++) {
            runCase(seed, c, random);
        }
    }

    private static void runCase(long seed, int c, SplittableRandom random) {
        int n = 1 + random.nextInt(random.nextBoolean() ? 70 : 300);
        int d = WIDTHS[random.nextInt(WIDTHS.length)];
        int kvHeads = 1 + random.nextInt(2);
        int heads = kvHeads * (1 + random.nextInt(2));
        int batch = 1 + random.nextInt(2);
        int queryBlock = random.nextBoolean() ? 1 + random.nextInt(40) : 32 * (1 + random.nextInt(8));
        int keyBlock = random.nextBoolean() ? 1 + random.nextInt(70) : 32 * (1 + random.nextInt(8));
        AttentionMask mask = mask(random, batch, n);
        FlashAttention op = FlashAttention.withTiles(queryBlock, keyBlock, 1 + random.nextInt(2));
        // float32 against the float64 reference: head widths up to 129 and rows of up to 300 keys stay within the
        // flash tests' 1e-5 (relative to the largest entry).
        FlashAttentionTest.inEveryTilePath(() -> FlashAttentionTest.checkAgainstReference(seed * 1000 + c,
                DataType.FLOAT, batch, heads, kvHeads, n, n, d, mask, 1e-5, op));
    }

    private static AttentionMask mask(SplittableRandom random, int batch, int n) {
        switch (random.nextInt(5)) {
            case 0:
                return AttentionMask.none();
            case 1:
                return AttentionMask.causal();
            case 2:
                return AttentionMask.builder().causal(random.nextBoolean()).window(1 + random.nextInt(n + 1)).build();
            case 3:
                return AttentionMask.builder().causal(true)
                        .documents(Documents.random(random.nextLong(), batch, n, 1 + random.nextInt(n))).build();
            default:
                return AttentionMask.builder().causal(random.nextBoolean())
                        .documents(Documents.random(random.nextLong(), batch, n, 1 + random.nextInt(n)))
                        .window(1 + random.nextInt(n + 1)).build();
        }
    }
}
