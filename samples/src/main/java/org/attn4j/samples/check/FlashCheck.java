package org.attn4j.samples.check;

import java.util.List;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;

/** {@code --algo flash}: {@link FlashAttention} on one device, nothing sent. */
final class FlashCheck implements CheckableAlgorithm {

    private final FlashAttention attention = FlashAttention.defaults();

    @Override
    public int workers() {
        return 1;
    }

    @Override
    public AttentionOutput forward(CheckProblem p) {
        return attention.forward(p.q(), p.k(), p.v(), p.mask(), p.scale());
    }

    @Override
    public AttentionGradients backward(CheckProblem p, AttentionOutput f) {
        return attention.backward(p.q(), p.k(), p.v(), f.output(), f.lse(), p.dO(), p.mask(), p.scale());
    }

    @Override
    public List<RankTraffic> bytesSent() {
        return List.of(new RankTraffic(0, 0, 0));
    }
}
