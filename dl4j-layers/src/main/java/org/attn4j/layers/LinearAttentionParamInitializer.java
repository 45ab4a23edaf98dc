package org.attn4j.layers;

import java.util.Map;

import org.attn4j.ops.linear.Decay;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Parameters of a {@link LinearAttentionLayer}, laid out in one flat vector in this order:
 * <pre>
 *   Wq [nIn, H*hs] | bq [1, H*hs] | Wk [nIn, Hkv*hs] | bk [1, Hkv*hs] | Wv [nIn, Hkv*hs] | bv [1, Hkv*hs]
 *   | g [1, H*hs] | Wo [H*hs, nOut] | bo [1, nOut] | theta [1, H] (only with a learned decay)
 * </pre>
 * Weights are 'f'-order views as in DL4J's {@code DefaultParamInitializer}; gradients use the same slicing.
 * The norm gain {@code g} starts at the layer's {@code gainInit} (1 unless set, as for DL4J's layer norm gain
 * "g") and {@code theta} at {@code logit(lambda)} of the configured decay; neither is a weight or a bias, so
 * DL4J's weight regularisation and weight noise leave them alone. The projections' keys are
 * {@link AttentionParamInitializer}'s, e.g. {@code LinearAttentionParamInitializer.WQ}.
 */
public final class LinearAttentionParamInitializer extends AttentionParamInitializer<LinearAttentionLayer> {

    /** Gain of the RMS norm over the merged heads {@code [1, H*hs]}. */
    public static final String GAIN = "g";
    /** Decay logits {@code [1, H]}, {@code lambda = sigmoid(theta)}; only with a learned decay. */
    public static final String THETA = "theta";

    private static final LinearAttentionParamInitializer INSTANCE = new LinearAttentionParamInitializer();

    private LinearAttentionParamInitializer() {
        super(LinearAttentionLayer.class);
    }

    /** The shared, stateless instance. */
    public static LinearAttentionParamInitializer getInstance() {
        return INSTANCE;
    }

    /**
     * The input projections, then {@code g [1, H*hs]}, {@code Wo [H*hs, nOut]}, {@code bo [1, nOut]} and, with a
     * learned decay, {@code theta [1, H]}: in all {@code (nIn + 1)(H + 2 Hkv) hs + H hs + (H hs + 1) nOut}
     * parameters, plus H with a learned decay.
     */
    @Override
    Map<String, long[]> shapes(LinearAttentionLayer l) {
        long q = (long) l.getNHeads() * l.effectiveHeadSize();
        Map<String, long[]> s = inputProjectionShapes(l);
        s.put(GAIN, new long[] {1, q});
        s.put(WO, new long[] {q, l.getNOut()});
        if (l.isOutputBias()) {
            s.put(BO, new long[] {1, l.getNOut()});
        }
        if (l.isLearnDecay()) {
            s.put(THETA, new long[] {1, l.getNHeads()});
        }
        return s;
    }

    /**
     * {@code g} to {@code gainInit}, {@code theta} to {@code logit(lambda)} of
     * {@link LinearAttentionLayer#configuredDecay()}, weights and biases as every attention layer's.
     */
    @Override
    void initialize(LinearAttentionLayer layer, String key, INDArray view) {
        switch (key) {
            case GAIN -> view.assign(layer.getGainInit());
            case THETA -> initDecayLogits(layer.configuredDecay(), view);
            default -> super.initialize(layer, key, view);
        }
    }

    private static void initDecayLogits(Decay decay, INDArray theta) {
        for (int h = 0; h < theta.length(); h++) {
            double lambda = decay.lambda(h);
            theta.putScalar(0, h, Math.log(lambda / (1 - lambda)));
        }
    }
}
