package org.attn4j.samples.check;

import java.util.List;

import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;

/**
 * {@code --algo linear}: {@link LinearAttention} on one device with a zero incoming state, nothing sent.
 * The output has no log-sum-exp; the backward pass reuses the forward pass's state cache.
 */
final class LinearCheck implements CheckableAlgorithm {

    private final LinearAttention attention = LinearAttention.defaults();
    private LinearAttentionOutput forward;

    @Override
    public int workers() {
        return 1;
    }

    @Override
    public AttentionOutput forward(CheckProblem p) {
        forward = attention.forward(p.q(), p.k(), p.v(), Decay.of(p.decay()), p.mask().isCausal(), null,
                p.mask().documents());
        return new AttentionOutput(forward.output(), null);
    }

    @Override
    public AttentionGradients backward(CheckProblem p, AttentionOutput f) {
        LinearAttentionGradients g = attention.backward(p.q(), p.k(), p.v(), Decay.of(p.decay()),
                p.mask().isCausal(), null, p.dO(), null, forward.cache(), p.mask().documents());
        return new AttentionGradients(g.dq(), g.dk(), g.dv());
    }

    @Override
    public List<RankTraffic> bytesSent() {
        return List.of(new RankTraffic(0, 0, 0));
    }
}
