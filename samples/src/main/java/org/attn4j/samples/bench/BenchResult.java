package org.attn4j.samples.bench;

/**
 * One measured (or refused) configuration of the attention benchmark: one row of its CSV.
 *
 * @param n                 sequence length
 * @param impl              what ran
 * @param causal            causal mask or none
 * @param pass              forward only, or forward then backward
 * @param status            whether it ran
 * @param medianMs          median wall time in milliseconds (NaN unless {@link Status#OK})
 * @param repeats           timed runs the median is over (0 unless ok; 0 for the floor, which is computed)
 * @param peakIncreaseBytes peak resident memory above the baseline during the runs (-1 if not measured)
 * @param note              why it failed or was skipped, or empty
 */
public record BenchResult(int n, Impl impl, boolean causal, Pass pass, Status status, double medianMs,
                          int repeats, long peakIncreaseBytes, String note) {

    /** What ran. */
    public enum Impl {
        /** attn4j's FlashAttention. */
        ATTN4J("attn4j"),
        /** attn4j's portable kernel (ND4J operations only, {@code attn4j.kernel=portable}). */
        PORTABLE("attn4j-portable"),
        /** ND4J's stock DotProductAttention / DotProductAttentionBp custom ops. */
        STOCK("nd4j-stock"),
        /** The gemm floor: the multiply-adds at the measured gemm rate, computed, not run. */
        FLOOR("floor"),
        /** PyTorch's {@code scaled_dot_product_attention} on the CPU, run by an anchor outside the project. */
        LIBTORCH("libtorch");

        private final String label;

        Impl(String label) {
            this.label = label;
        }

        /** The CSV name. */
        public String label() {
            return label;
        }
    }

    /** Which passes a timed run covers. */
    public enum Pass {
        /** Forward only. */
        FORWARD("fwd"),
        /** Forward, then backward. */
        FORWARD_BACKWARD("fwd+bwd");

        private final String label;

        Pass(String label) {
            this.label = label;
        }

        /** The CSV name. */
        public String label() {
            return label;
        }
    }

    /** Whether the configuration ran. */
    public enum Status {
        /** Ran; time and memory are valid. */
        OK,
        /** Threw; the note holds the exception. */
        FAILED,
        /** Not run; the note says why. */
        SKIPPED;

        /** The CSV name. */
        public String label() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /** A configuration that ran. */
    static BenchResult ok(int n, Impl impl, boolean causal, Pass pass, double medianMs, int repeats, long peak) {
        return new BenchResult(n, impl, causal, pass, Status.OK, medianMs, repeats, peak, "");
    }

    /** A configuration that did not run or failed. */
    static BenchResult notRun(int n, Impl impl, boolean causal, Pass pass, Status status, String note) {
        return new BenchResult(n, impl, causal, pass, status, Double.NaN, 0, -1, note);
    }
}
