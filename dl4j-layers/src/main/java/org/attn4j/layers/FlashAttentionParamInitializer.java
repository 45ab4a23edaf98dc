package org.attn4j.layers;

import java.util.List;
import java.util.Map;

import org.deeplearning4j.nn.conf.layers.Layer;

/**
 * Parameters of a {@link FlashAttentionLayer}, laid out in one flat vector in this order:
 * <pre>
 *   Wq [nIn, H*hs] | bq [1, H*hs] | Wk [nIn, Hkv*hs] | bk [1, Hkv*hs] | Wv [nIn, Hkv*hs] | bv [1, Hkv*hs]
 *   | Wo [H*hs, nOut] | bo [1, nOut]
 * </pre>
 * without the biases the layer switches off ({@code qkvBias}, {@code outputBias}).
 * Weights are 'f'-order views as in DL4J's {@code DefaultParamInitializer}; gradients use the same slicing.
 * The keys are {@link AttentionParamInitializer}'s, e.g. {@code FlashAttentionParamInitializer.WQ}.
 */
public final class FlashAttentionParamInitializer extends AttentionParamInitializer<FlashAttentionLayer> {

    private static final FlashAttentionParamInitializer INSTANCE = new FlashAttentionParamInitializer();

    private FlashAttentionParamInitializer() {
        super(FlashAttentionLayer.class);
    }

    /** The shared, stateless instance. */
    public static FlashAttentionParamInitializer getInstance() {
        return INSTANCE;
    }

    /**
     * The input projections, then {@code Wo [H*hs, nOut]} and {@code bo [1, nOut]}: in all
     * {@code nIn*(H + 2 Hkv)*hs + (H + 2 Hkv)*hs + H*hs*nOut + nOut} parameters.
     */
    @Override
    Map<String, long[]> shapes(FlashAttentionLayer l) {
        Map<String, long[]> s = inputProjectionShapes(l);
        s.put(WO, new long[] {(long) l.getNHeads() * l.effectiveHeadSize(), l.getNOut()});
        if (l.isOutputBias()) {
            s.put(BO, new long[] {1, l.getNOut()});
        }
        return s;
    }
}
