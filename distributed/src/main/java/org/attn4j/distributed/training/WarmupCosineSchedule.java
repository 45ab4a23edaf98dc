package org.attn4j.distributed.training;

import org.nd4j.linalg.schedule.ISchedule;
import org.nd4j.shade.jackson.annotation.JsonProperty;

/**
 * The learning rate of a fine-tuning run: a linear warm-up to {@code peak} over the first {@code warmup} steps, then
 * half a cosine down to {@code floor} at step {@code total}, and {@code floor} after it. The schedule GPT-3 and
 * Llama were trained with (Brown et al. 2020, appendix B; Touvron et al. 2023, section 2.2), and the one Hugging Face
 * transformers calls {@code get_cosine_schedule_with_warmup} (there with a floor of 0).
 *
 * <p>Step {@code i} (0-based, DL4J's iteration count) of the warm-up takes {@code peak (i + 1) / warmup}, so that the
 * first update already moves the weights; step {@code i >= warmup} takes
 * {@code floor + (peak - floor) (1 + cos(pi min(1, (i - warmup) / (total - warmup)))) / 2}. Goes into any DL4J
 * updater ({@code new Adam(schedule)}) and through its JSON.
 */
public final class WarmupCosineSchedule implements ISchedule {

    private static final long serialVersionUID = 1L;

    @JsonProperty
    private final double peak;
    @JsonProperty
    private final double floor;
    @JsonProperty
    private final int warmup;
    @JsonProperty
    private final int total;

    /**
     * @param peak   the rate at the end of the warm-up, positive
     * @param floor  the rate the cosine ends at, in {@code [0, peak]}
     * @param warmup warm-up steps, {@code >= 0}
     * @param total  the step the cosine reaches {@code floor}, {@code > warmup} (or {@code == warmup == 0})
     * @throws IllegalArgumentException naming the value out of range
     */
    public WarmupCosineSchedule(@JsonProperty("peak") double peak, @JsonProperty("floor") double floor,
                                @JsonProperty("warmup") int warmup, @JsonProperty("total") int total) {
        if (!(peak > 0) || Double.isInfinite(peak)) {
            throw new IllegalArgumentException("WarmupCosineSchedule: the peak rate must be positive, got " + peak);
        }
        if (!(floor >= 0 && floor <= peak)) {
            throw new IllegalArgumentException("WarmupCosineSchedule: the floor must be in [0, " + peak + "], got "
                    + floor);
        }
        if (warmup < 0 || total < warmup || (total == warmup && total != 0)) {
            throw new IllegalArgumentException("WarmupCosineSchedule: warm-up steps must be >= 0 and fewer than the "
                    + "total, got " + warmup + " of " + total);
        }
        this.peak = peak;
        this.floor = floor;
        this.warmup = warmup;
        this.total = total;
    }

    @Override
    public double valueAt(int iteration, int epoch) {
        if (iteration < warmup) {
            return peak * (iteration + 1) / warmup;
        }
        if (total == warmup) {
            return peak;
        }
        double progress = Math.min(1.0, (double) (iteration - warmup) / (total - warmup));
        return floor + (peak - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
    }

    @Override
    public ISchedule clone() {
        return new WarmupCosineSchedule(peak, floor, warmup, total);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof WarmupCosineSchedule s && s.peak == peak && s.floor == floor && s.warmup == warmup
                && s.total == total;
    }

    @Override
    public int hashCode() {
        return java.util.Objects.hash(peak, floor, warmup, total);
    }

    @Override
    public String toString() {
        return "WarmupCosineSchedule(peak " + peak + ", floor " + floor + ", warm-up " + warmup + " of " + total
                + " steps)";
    }
}
