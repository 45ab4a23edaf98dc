package org.attn4j.ops;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.function.Supplier;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * The portable kernels (ND4J operations only, {@code attn4j.kernel=portable}) against the CPU kernels on the same
 * inputs, float64 to 1e-12: flash attention forward and backward under every mask rule (causal, window, key
 * padding, documents with padding, explicit positions) with GQA, and linear attention's chunked pass with per-head
 * decay, documents, incoming state, outgoing-state gradient and the decay gradient. The reference tests of both ops
 * also run with the portable kernel forced (the build's second test execution). The comparisons need the CPU
 * kernels, so they run on the CPU backend only; off it (.ci/cuda-check) the reference tests check the portable
 * kernels, and this test checks which kernel runs.
 */
class PortableKernelTest {

    private static INDArray randn(long seed, long... shape) {
        Nd4j.getRandom().setSeed(seed);
        return Nd4j.randn(DataType.DOUBLE, shape);
    }

    /** {@code op} with the kernel property set to {@code kernel}, restored afterwards. */
    private static <T> T with(String kernel, Supplier<T> op) {
        String before = System.getProperty(Kernel.PROPERTY);
        System.setProperty(Kernel.PROPERTY, kernel);
        try {
            return op.get();
        } finally {
            if (before == null) {
                System.clearProperty(Kernel.PROPERTY);
            } else {
                System.setProperty(Kernel.PROPERTY, before);
            }
        }
    }

    private static void assertClose(String what, INDArray expected, INDArray actual) {
        assertEquals(java.util.Arrays.toString(expected.shape()), java.util.Arrays.toString(actual.shape()), what);
        double scale = Math.max(1.0, expected.amaxNumber().doubleValue());
        double err = expected.sub(actual).amaxNumber().doubleValue();
        assertTrue(err <= 1e-12 * scale, what + ": portable differs from the CPU kernel by " + err);
    }

    /** The CPU kernels run on ND4J's CPU backend only. */
    private static void assumeCpuBackend() {
        assumeTrue(Nd4j.getEnvironment().isCPU(), "the CPU kernels need ND4J's CPU backend");
    }

    @Test
    void flashAttentionEqualsTheCpuKernelUnderEveryMaskRule() {
        assumeCpuBackend();
        int b = 2;
        int n = 150;
        INDArray q = randn(1, b, 4, n, 8);
        INDArray k = randn(2, b, 2, n, 8);
        INDArray v = randn(3, b, 2, n, 8);
        INDArray g = randn(4, b, 4, n, 8);
        INDArray pad = Nd4j.ones(DataType.DOUBLE, b, n);
        pad.get(NDArrayIndex.point(1), NDArrayIndex.interval(120, n)).assign(0);
        int[] shuffled = new int[n];
        for (int i = 0; i < n; i++) {
            shuffled[i] = (i * 7) % n;                                  // a striped-like order of positions
        }
        AttentionMask[] masks = {AttentionMask.none(), AttentionMask.causal(),
            AttentionMask.builder().causal(true).window(33).build(), AttentionMask.builder().window(20).build(),
            AttentionMask.builder().causal(true).keyPadding(pad).build(),
            AttentionMask.builder().causal(true).documents(Documents.random(5, b, n, 40)).build(),
            AttentionMask.builder().documents(Documents.random(6, b, n, 60)).build(),
            AttentionMask.builder().causal(true).queryPositions(shuffled).keyPositions(shuffled).build()};
        FlashAttention op = FlashAttention.withTiles(32, 48, 2);
        double scale = FlashAttention.defaultScale(8);
        for (AttentionMask mask : masks) {
            AttentionOutput cpu = with("cpu", () -> op.forward(q, k, v, mask, scale));
            AttentionOutput portable = with("portable", () -> op.forward(q, k, v, mask, scale));
            assertClose("O, " + mask, cpu.output(), portable.output());
            assertClose("LSE, " + mask, finite(cpu.lse()), finite(portable.lse()));
            assertEquals(unseen(cpu.lse()), unseen(portable.lse()), "rows that see no key, " + mask);
            AttentionGradients gc = with("cpu", () -> op.backward(q, k, v, cpu.output(), cpu.lse(), g, mask, scale));
            AttentionGradients gp = with("portable", () -> op.backward(q, k, v, cpu.output(), cpu.lse(), g, mask,
                    scale));
            assertClose("dQ, " + mask, gc.dq(), gp.dq());
            assertClose("dK, " + mask, gc.dk(), gp.dk());
            assertClose("dV, " + mask, gc.dv(), gp.dv());
        }
    }

    /** Rows whose log-sum-exp is infinite: those that saw no key. */
    private static int unseen(INDArray lse) {
        return lse.isInfinite().castTo(DataType.INT).sumNumber().intValue();
    }

    private static INDArray finite(INDArray a) {
        INDArray c = a.dup();
        org.nd4j.linalg.indexing.BooleanIndexing.replaceWhere(c, 0.0,
                org.nd4j.linalg.indexing.conditions.Conditions.isInfinite());
        return c;
    }

    @Test
    void linearAttentionEqualsTheCpuKernel() {
        assumeCpuBackend();
        int b = 2;
        int n = 90;
        INDArray q = randn(11, b, 4, n, 6);
        INDArray k = randn(12, b, 2, n, 6);
        INDArray v = randn(13, b, 2, n, 6);
        INDArray g = randn(14, b, 4, n, 6);
        INDArray kvIn = randn(15, b, 4, 6, 6);
        INDArray dKvOut = randn(16, b, 4, 6, 6);
        Decay decay = Decay.perHead(0.9, 0.97, 1.0, 0.5);
        LinearAttention op = LinearAttention.withChunk(16, 2).withDecayGradient();
        for (Documents docs : new Documents[] {null, Documents.random(17, b, n, 30)}) {
            LinearAttentionOutput cpu = with("cpu", () -> op.forward(q, k, v, decay, true, kvIn, docs));
            LinearAttentionOutput portable = with("portable", () -> op.forward(q, k, v, decay, true, kvIn, docs));
            assertClose("O, documents " + docs, cpu.output(), portable.output());
            assertClose("kvOut, documents " + docs, cpu.kvOut(), portable.kvOut());
            LinearAttentionGradients gc = with("cpu", () -> op.backward(q, k, v, decay, true, kvIn, g, dKvOut,
                    cpu.cache(), docs));
            LinearAttentionGradients gp = with("portable", () -> op.backward(q, k, v, decay, true, kvIn, g, dKvOut,
                    portable.cache(), docs));
            assertClose("dQ", gc.dq(), gp.dq());
            assertClose("dK", gc.dk(), gp.dk());
            assertClose("dV", gc.dv(), gp.dv());
            assertClose("dKvIn", gc.dKvIn(), gp.dKvIn());
            assertClose("dDecay", gc.dDecay(), gp.dDecay());
        }
    }

    @Test
    void thePropertyChoosesTheKernelAndRefusesOtherValues() {
        if (Nd4j.getEnvironment().isCPU()) {
            assertEquals(Kernel.CPU, with("auto", Kernel::current), "auto on the CPU backend");
            assertEquals(Kernel.CPU, with("cpu", Kernel::current));
        } else {
            assertEquals(Kernel.PORTABLE, with("auto", Kernel::current), "auto off the CPU backend");
            IllegalStateException off = assertThrows(IllegalStateException.class, () -> with("cpu", Kernel::current));
            assertTrue(off.getMessage().startsWith("attn4j.kernel=cpu reads the arrays' host buffers"),
                    off.getMessage());
        }
        assertEquals(Kernel.PORTABLE, with("Portable ", Kernel::current));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> with("gpu", Kernel::current));
        assertEquals("attn4j.kernel must be auto, cpu or portable, got 'gpu'", e.getMessage());
    }
}
