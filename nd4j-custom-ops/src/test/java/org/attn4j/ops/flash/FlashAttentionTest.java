package org.attn4j.ops.flash;

import static org.attn4j.ops.flash.Arrays4.assertClose;
import static org.attn4j.ops.flash.Arrays4.assertNoNaN;
import static org.attn4j.ops.flash.Arrays4.randn;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.stream.Stream;

import org.attn4j.ops.testing.ReferenceAttention;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/** The flash op against the plain float64 reference, and its contract on bad and degenerate input. */
class FlashAttentionTest {

    private static final FlashAttention SMALL_TILES = FlashAttention.withTiles(32, 48, 2);

    static Stream<Arguments> cases() {
        // n, d, batch, heads, kvHeads, causal, window
        return Stream.of(
                Arguments.of(1, 8, 1, 1, 1, false, 0),
                Arguments.of(1, 24, 2, 4, 2, true, 0),
                Arguments.of(7, 8, 3, 2, 2, true, 0),
                Arguments.of(7, 24, 2, 4, 1, false, 0),
                Arguments.of(113, 64, 2, 4, 2, true, 0),
                Arguments.of(113, 8, 1, 3, 3, false, 0),
                Arguments.of(203, 24, 2, 2, 1, true, 0),
                Arguments.of(203, 64, 1, 4, 4, false, 0),
                Arguments.of(113, 24, 2, 4, 2, true, 17),
                Arguments.of(203, 8, 1, 2, 1, false, 40));
    }

    @ParameterizedTest(name = "n={0} d={1} b={2} h={3} hkv={4} causal={5} window={6}")
    @MethodSource("cases")
    void matchesFloat64ReferenceForwardAndBackward(int n, int d, int b, int h, int hkv, boolean causal, int w) {
        long seed = 1000L * n + 10L * d + h;
        AttentionMask mask = AttentionMask.builder().causal(causal).window(w).build();
        checkAgainstReference(seed, DataType.DOUBLE, b, h, hkv, n, n, d, mask, 1e-12, SMALL_TILES);
        checkAgainstReference(seed, DataType.FLOAT, b, h, hkv, n, n, d, mask, 1e-5, SMALL_TILES);
    }

    @Test
    void partlyMaskedTilesComputedInGroupsOfRowsMatchTheReference() {
        // Query blocks of 256 rows: partly masked tiles (the causal diagonal, a window's edges, padding) are
        // computed in groups of 128 rows, each over the columns its rows may see; blocks not aligned with N.
        FlashAttention tiles = FlashAttention.withTiles(256, 192, 2);
        INDArray pad = Nd4j.ones(DataType.DOUBLE, 2, 600);
        pad.get(NDArrayIndex.point(1), NDArrayIndex.interval(450, 600)).assign(0);
        AttentionMask[] masks = {AttentionMask.causal(), AttentionMask.builder().causal(true).window(100).build(),
            AttentionMask.builder().window(70).build(), AttentionMask.builder().causal(true).keyPadding(pad).build()};
        for (AttentionMask mask : masks) {
            checkAgainstReference(91, DataType.DOUBLE, 2, 2, 1, 600, 600, 16, mask, 1e-12, tiles);
            inEveryTilePath(() -> checkAgainstReference(92, DataType.FLOAT, 2, 2, 1, 600, 600, 16, mask, 1e-5, tiles));
        }
    }

    @Test
    void vectorAndNd4jTilePathsBothMatchReferenceInFloat32() {
        AttentionMask mask = AttentionMask.builder().causal(true).window(30).build();
        assertTrue(VectorTileMath.AVAILABLE, "tests run with --add-modules jdk.incubator.vector (pom argLine)");
        inEveryTilePath(() -> {
            checkAgainstReference(77, DataType.FLOAT, 2, 4, 2, 203, 203, 24, mask, 1e-5, SMALL_TILES);
            checkAgainstReference(78, DataType.FLOAT, 1, 2, 1, 113, 113, 64, AttentionMask.none(), 1e-5,
                    FlashAttention.defaults());
        });
    }

    @Test
    void keepsItsShiftOrMovesItWhenLaterKeysScoreFarHigherOrLower() {
        // Key j scaled by 1 + j/8 (then the reverse): within a row, scores of later tiles exceed the running
        // maximum by far more than the float32 path lets a shift lag (2^8), in the middle of tiles too, so the
        // rows rescale what they already wrote; the reverse order never moves the shift after the first tile.
        int n = 203;
        INDArray ramp = Nd4j.arange(n).castTo(DataType.FLOAT).divi(8).addi(1).reshape(1, 1, n, 1);
        for (boolean rising : new boolean[] {true, false}) {
            INDArray scaleOfKey = rising ? ramp : Nd4j.reverse(ramp.reshape(n)).reshape(1, 1, n, 1);
            INDArray q = randn(31, DataType.FLOAT, 1, 2, n, 16).muli(3);
            INDArray k = randn(32, DataType.FLOAT, 1, 2, n, 16).muli(scaleOfKey);
            INDArray v = randn(33, DataType.FLOAT, 1, 2, n, 16);
            INDArray g = randn(34, DataType.FLOAT, 1, 2, n, 16);
            for (AttentionMask mask : new AttentionMask[] {AttentionMask.none(), AttentionMask.causal()}) {
                checkAgainstReference(q, k, v, g, mask, 1e-5, SMALL_TILES, (rising ? "rising" : "falling")
                        + " key scale, " + mask);
            }
        }
    }

    @Test
    void matchesReferenceWithDefaultTilesAndKeyPadding() {
        long seed = 42;
        int n = 203;
        INDArray pad = Nd4j.ones(DataType.DOUBLE, 3, n);
        pad.get(NDArrayIndex.point(0), NDArrayIndex.interval(150, n)).assign(0);
        pad.get(NDArrayIndex.point(2), NDArrayIndex.interval(1, n)).assign(0);
        AttentionMask causalPad = AttentionMask.builder().causal(true).keyPadding(pad).build();
        AttentionMask fullPad = AttentionMask.builder().keyPadding(pad).build();
        for (AttentionMask m : new AttentionMask[] {causalPad, fullPad}) {
            checkAgainstReference(seed, DataType.DOUBLE, 3, 4, 2, n, n, 24, m, 1e-12, FlashAttention.defaults());
            checkAgainstReference(seed, DataType.DOUBLE, 3, 4, 2, n, n, 24, m, 1e-12, SMALL_TILES);
            checkAgainstReference(seed, DataType.FLOAT, 3, 4, 2, n, n, 24, m, 1e-5, SMALL_TILES);
        }
    }

    @Test
    void matchesReferenceForShardedQueriesAgainstLongerKeys() {
        // 37 queries holding the global positions of a middle shard; 150 keys at positions 0..149.
        int[] qPos = new int[37];
        for (int i = 0; i < qPos.length; i++) {
            qPos[i] = 60 + 2 * i;
        }
        AttentionMask mask = AttentionMask.builder().causal(true).window(50).queryPositions(qPos).build();
        checkAgainstReference(7, DataType.DOUBLE, 2, 4, 2, 37, 150, 8, mask, 1e-12, SMALL_TILES);
    }

    /**
     * Keys and values as the first rows of each head of larger buffers (a decoding cache with room to grow, read in
     * place by the forward kernel), and as views that are not (rows from the middle, every other row): all equal
     * the reference on the same values.
     */
    @Test
    void keysAndValuesThatAreViewsOfLargerBuffersMatchTheReference() {
        int nk = 150;
        INDArray qAll = randn(51, DataType.DOUBLE, 2, 4, 37, 16);
        INDArray kBuffer = randn(52, DataType.DOUBLE, 2, 2, 2 * nk + 9, 16);
        INDArray vBuffer = randn(53, DataType.DOUBLE, 2, 2, 2 * nk + 9, 16);
        INDArray g = randn(54, DataType.DOUBLE, 2, 4, 37, 16);
        int[] qPos = new int[37];
        for (int i = 0; i < qPos.length; i++) {
            qPos[i] = nk - qPos.length + i;
        }
        AttentionMask mask = AttentionMask.builder().causal(true).window(90).queryPositions(qPos).build();
        INDArray[][] views = {
            {rows(kBuffer, NDArrayIndex.interval(0, nk)), rows(vBuffer, NDArrayIndex.interval(0, nk))},
            {rows(kBuffer, NDArrayIndex.interval(9, nk + 9)), rows(vBuffer, NDArrayIndex.interval(9, nk + 9))},
            {rows(kBuffer, NDArrayIndex.interval(0, 2, 2 * nk)), rows(vBuffer, NDArrayIndex.interval(0, 2, 2 * nk))}};
        for (INDArray[] kv : views) {
            for (FlashAttention op : new FlashAttention[] {SMALL_TILES, FlashAttention.defaults()}) {
                checkAgainstReference(qAll, kv[0], kv[1], g, mask, 1e-12, op, "keys " + java.util.Arrays.toString(
                        kv[0].stride()) + " at offset " + kv[0].offset() + ", " + op);
            }
        }
        assertEquals(2 * nk + 9, org.attn4j.ops.Views.headRows(views[0][0]), "the first view is read in place");
        assertEquals(-1, org.attn4j.ops.Views.headRows(views[1][0]));
        assertEquals(-1, org.attn4j.ops.Views.headRows(views[2][0]));
    }

    private static INDArray rows(INDArray buffer, org.nd4j.linalg.indexing.INDArrayIndex rows) {
        return buffer.get(NDArrayIndex.all(), NDArrayIndex.all(), rows, NDArrayIndex.all());
    }

    @Test
    void equalsContiguousResultUnderStripedPositions() {
        long seed = 11;
        int n = 113;
        int p = 4;
        int[] perm = new int[n];
        int idx = 0;
        for (int r = 0; r < p; r++) {
            for (int i = r; i < n; i += p) {
                perm[idx++] = i;        // striped: worker r holds r, r+p, r+2p, ...
            }
        }
        INDArray q = randn(seed, DataType.DOUBLE, 2, 2, n, 8);
        INDArray k = randn(seed + 1, DataType.DOUBLE, 2, 1, n, 8);
        INDArray v = randn(seed + 2, DataType.DOUBLE, 2, 1, n, 8);
        INDArray g = randn(seed + 3, DataType.DOUBLE, 2, 2, n, 8);
        FlashAttention op = SMALL_TILES;
        AttentionOutput whole = op.forward(q, k, v, AttentionMask.causal());
        AttentionGradients wholeGrad = op.backward(q, k, v, whole.output(), whole.lse(), g,
                AttentionMask.causal(), FlashAttention.defaultScale(8));
        AttentionMask striped = AttentionMask.builder().causal(true).queryPositions(perm).keyPositions(perm).build();
        INDArray qs = permute(q, perm);
        INDArray ks = permute(k, perm);
        INDArray vs = permute(v, perm);
        AttentionOutput out = op.forward(qs, ks, vs, striped);
        AttentionGradients grad = op.backward(qs, ks, vs, out.output(), out.lse(), permute(g, perm), striped,
                FlashAttention.defaultScale(8));
        assertClose("O", out.output(), permute(whole.output(), perm), 1e-12, "seed " + seed);
        assertClose("dQ", grad.dq(), permute(wholeGrad.dq(), perm), 1e-12, "seed " + seed);
        assertClose("dK", grad.dk(), permute(wholeGrad.dk(), perm), 1e-12, "seed " + seed);
        assertClose("dV", grad.dv(), permute(wholeGrad.dv(), perm), 1e-12, "seed " + seed);
    }

    @Test
    void rowsThatSeeNoKeyGiveZeroOutputNegativeInfinityLseAndZeroGradients() {
        int[] qPos = {0, 1, 2, 3};
        int[] kPos = {5, 6, 7, 8, 9};
        AttentionMask mask = AttentionMask.builder().causal(true).queryPositions(qPos).keyPositions(kPos).build();
        for (DataType t : new DataType[] {DataType.DOUBLE, DataType.FLOAT}) {
            INDArray q = randn(3, t, 1, 2, 4, 8);
            INDArray k = randn(4, t, 1, 2, 5, 8);
            INDArray v = randn(5, t, 1, 2, 5, 8);
            INDArray g = randn(6, t, 1, 2, 4, 8);
            AttentionOutput out = FlashAttention.defaults().forward(q, k, v, mask);
            assertEquals(0.0, out.output().norm2Number().doubleValue());
            for (double l : out.lse().castTo(DataType.DOUBLE).data().asDouble()) {
                assertEquals(Double.NEGATIVE_INFINITY, l);
            }
            AttentionGradients grad = FlashAttention.defaults().backward(q, k, v, out.output(), out.lse(), g, mask,
                    FlashAttention.defaultScale(8));
            for (INDArray x : new INDArray[] {grad.dq(), grad.dk(), grad.dv()}) {
                assertNoNaN("gradient", x);
                assertEquals(0.0, x.norm2Number().doubleValue());
            }
        }
        // A window of 1 with the diagonal padded away leaves some rows with nothing to see.
        INDArray pad = Nd4j.ones(DataType.DOUBLE, 1, 9);
        pad.putScalar(0, 4, 0);
        AttentionMask lonely = AttentionMask.builder().causal(true).window(1).keyPadding(pad).build();
        checkAgainstReference(9, DataType.DOUBLE, 1, 2, 2, 9, 9, 8, lonely, 1e-12, SMALL_TILES);
    }

    @Test
    void callsInsideWorkspacesThatCloseBetweenCallsKeepWorking() {
        // Per-thread scratch buffers outlive a call; they must not belong to a workspace open at the time.
        var config = org.nd4j.linalg.api.memory.conf.WorkspaceConfiguration.builder().initialSize(1 << 20)
                .policyLearning(org.nd4j.linalg.api.memory.enums.LearningPolicy.FIRST_LOOP).build();
        FlashAttention op = FlashAttention.withTiles(16, 16, 1);
        INDArray expected = null;
        for (int round = 0; round < 3; round++) {
            try (var ws = Nd4j.getWorkspaceManager().getAndActivateWorkspace(config, "ATTN4J_TEST_WS")) {
                INDArray q = randn(5, DataType.FLOAT, 1, 2, 40, 8);
                INDArray k = randn(6, DataType.FLOAT, 1, 2, 40, 8);
                AttentionOutput out = op.forward(q, k, k, AttentionMask.causal());
                AttentionGradients g = op.backward(q, k, k, out.output(), out.lse(), q, AttentionMask.causal(),
                        FlashAttention.defaultScale(8));
                INDArray got = g.dq().detach();
                if (expected == null) {
                    expected = got;
                } else {
                    assertClose("dQ", got, expected, 0, "round " + round);
                }
            }
        }
    }

    @Test
    void nanInputStaysNaN() {
        INDArray q = randn(1, DataType.FLOAT, 1, 1, 5, 8);
        q.putScalar(new long[] {0, 0, 2, 3}, Float.NaN);
        INDArray k = randn(2, DataType.FLOAT, 1, 1, 5, 8);
        INDArray v = randn(3, DataType.FLOAT, 1, 1, 5, 8);
        AttentionOutput out = FlashAttention.defaults().forward(q, k, v, AttentionMask.none());
        assertTrue(Double.isNaN(out.output().getDouble(0, 0, 2, 0)), "NaN query row must give NaN output");
        assertTrue(Double.isNaN(out.lse().getDouble(0, 0, 2)), "NaN query row must give NaN LSE");
        INDArray kBad = k.dup();
        kBad.putScalar(new long[] {0, 0, 1, 0}, Float.NaN);
        AttentionOutput out2 = FlashAttention.defaults().forward(randn(1, DataType.FLOAT, 1, 1, 5, 8), kBad, v,
                AttentionMask.none());
        assertTrue(Double.isNaN(out2.output().getDouble(0, 0, 4, 0)), "NaN key must reach every row that sees it");
    }

    @Test
    void rejectsBadInputWithNamedExpectedAndActualValues() {
        FlashAttention op = FlashAttention.defaults();
        INDArray q = randn(1, DataType.FLOAT, 1, 8, 5, 16);
        INDArray k3 = randn(1, DataType.FLOAT, 1, 3, 5, 16);
        assertMessage(() -> op.forward(q, k3, k3, AttentionMask.none()),
                "k has 3 heads, q has 8; q heads must be a multiple of k heads");
        INDArray kD = randn(1, DataType.FLOAT, 1, 2, 5, 8);
        assertMessage(() -> op.forward(q, kD, kD, AttentionMask.none()), "k has head dimension D=8, q has D=16");
        INDArray r3 = randn(1, DataType.FLOAT, 8, 5, 16);
        assertMessage(() -> op.forward(r3, k3, k3, AttentionMask.none()), "q must have rank 4");
        INDArray k = randn(1, DataType.FLOAT, 1, 2, 5, 16);
        assertMessage(() -> op.forward(q, k, k.castTo(DataType.DOUBLE), AttentionMask.none()),
                "q, k, v must share one data type");
        AttentionMask badPos = AttentionMask.builder().queryPositions(new int[] {0, 1, 2}).build();
        assertMessage(() -> op.forward(q, k, k, badPos), "3 query positions for 5 queries");
        AttentionMask badPad = AttentionMask.builder().keyPadding(Nd4j.ones(1, 4)).build();
        assertMessage(() -> op.forward(q, k, k, badPad), "key padding must have shape [1, 5]");
        INDArray empty = Nd4j.create(DataType.FLOAT, 1, 8, 0, 16);
        assertMessage(() -> op.forward(empty, k, k, AttentionMask.none()), "empty sequence");
        assertMessage(() -> op.forward(q, k, k, AttentionMask.none(), Double.NaN), "scale must be finite and > 0");
        assertMessage(() -> op.forward(q, k, k, null), "mask is null");
        AttentionOutput out = op.forward(q, k, k, AttentionMask.none());
        assertMessage(() -> op.backward(q, k, k, out.output(), out.lse().reshape(1, 8, 5, 1), out.output(),
                AttentionMask.none(), 0.25), "lse must have shape [1, 8, 5]");
        assertMessage(() -> AttentionMask.builder().window(-1), "window must be >= 0");
    }

    private static void assertMessage(Runnable call, String expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call::run);
        assertTrue(e.getMessage().contains(expected), "message '" + e.getMessage() + "' lacks '" + expected + "'");
    }

    static INDArray permute(INDArray a, int[] perm) {
        INDArray out = Nd4j.create(a.dataType(), a.shape());
        for (int i = 0; i < perm.length; i++) {
            out.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.point(i), NDArrayIndex.all())
                    .assign(a.get(NDArrayIndex.all(), NDArrayIndex.all(), NDArrayIndex.point(perm[i]),
                            NDArrayIndex.all()));
        }
        return out;
    }

    /**
     * Runs {@code check} with each tile math: the native one (where it loads), the Vector API one
     * ({@code attn4j.nativeTiles=false}) and ND4J's ({@code attn4j.noVector}).
     */
    static void inEveryTilePath(Runnable check) {
        String[][] paths = {{}, {"attn4j.nativeTiles", "false"}, {"attn4j.noVector", "true"}};
        for (String[] path : paths) {
            if (path.length > 0) {
                System.setProperty(path[0], path[1]);
            }
            try {
                check.run();
            } finally {
                if (path.length > 0) {
                    System.clearProperty(path[0]);
                }
            }
        }
    }

    static void checkAgainstReference(long seed, DataType type, int b, int h, int hkv, int nq, int nk, int d,
                                      AttentionMask mask, double tol, FlashAttention op) {
        INDArray q = randn(seed, type, b, h, nq, d);
        INDArray k = randn(seed + 1, type, b, hkv, nk, d);
        INDArray v = randn(seed + 2, type, b, hkv, nk, d);
        INDArray g = randn(seed + 3, type, b, h, nq, d);
        checkAgainstReference(q, k, v, g, mask, tol, op, "seed " + seed + ", " + type + ", " + mask + ", " + op);
    }

    static void checkAgainstReference(INDArray q, INDArray k, INDArray v, INDArray g, AttentionMask mask, double tol,
                                      FlashAttention op, String ctx) {
        DataType type = q.dataType();
        double scale = FlashAttention.defaultScale(q.size(3));
        ReferenceAttention ref = new ReferenceAttention(q, k, v, g, mask, scale);
        AttentionOutput out = op.forward(q, k, v, mask, scale);
        AttentionGradients grad = op.backward(q, k, v, out.output(), out.lse(), g, mask, scale);
        assertEquals(type, out.output().dataType());
        assertEquals(type, grad.dk().dataType());
        assertClose("O", out.output(), ref.output(), tol, ctx);
        assertClose("LSE", out.lse(), ref.lse(), tol, ctx);
        assertClose("dQ", grad.dq(), ref.dq(), tol, ctx);
        assertClose("dK", grad.dk(), ref.dk(), tol, ctx);
        assertClose("dV", grad.dv(), ref.dv(), tol, ctx);
        assertNoNaN("O", out.output());
        assertNoNaN("dQ", grad.dq());
    }
}
