package org.attn4j.layers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Parameters of a {@link SwiGluLayer}, laid out in one flat vector in this order:
 * <pre>
 *   Wg [nIn, hidden] | bg [1, hidden] | Wu [nIn, hidden] | bu [1, hidden] | Wd [hidden, nOut] | bd [1, nOut]
 * </pre>
 * the biases only with {@link SwiGluLayer#isBias()}. Weights are DL4J weights ('f'-order views, the network's
 * weight init, its regularisation), biases DL4J biases ({@code biasInit}).
 */
public final class SwiGluParamInitializer extends LayerParamInitializer<SwiGluLayer> {

    /** Gate projection weights {@code [nIn, hidden]}. */
    public static final String W_GATE = "Wg";
    /** Gate projection bias {@code [1, hidden]}. */
    public static final String B_GATE = "bg";
    /** Up projection weights {@code [nIn, hidden]}. */
    public static final String W_UP = "Wu";
    /** Up projection bias {@code [1, hidden]}. */
    public static final String B_UP = "bu";
    /** Down projection weights {@code [hidden, nOut]}. */
    public static final String W_DOWN = "Wd";
    /** Down projection bias {@code [1, nOut]}. */
    public static final String B_DOWN = "bd";

    private static final List<String> WEIGHTS = List.of(W_GATE, W_UP, W_DOWN);
    private static final List<String> BIASES = List.of(B_GATE, B_UP, B_DOWN);
    private static final SwiGluParamInitializer INSTANCE = new SwiGluParamInitializer();

    private SwiGluParamInitializer() {
        super(SwiGluLayer.class, WEIGHTS, BIASES);
    }

    /** The shared, stateless instance. */
    public static SwiGluParamInitializer getInstance() {
        return INSTANCE;
    }

    @Override
    Map<String, long[]> shapes(SwiGluLayer l) {
        long hidden = l.getHiddenSize();
        Map<String, long[]> s = new LinkedHashMap<>();
        s.put(W_GATE, new long[] {l.getNIn(), hidden});
        if (l.isBias()) {
            s.put(B_GATE, new long[] {1, hidden});
        }
        s.put(W_UP, new long[] {l.getNIn(), hidden});
        if (l.isBias()) {
            s.put(B_UP, new long[] {1, hidden});
        }
        s.put(W_DOWN, new long[] {hidden, l.getNOut()});
        if (l.isBias()) {
            s.put(B_DOWN, new long[] {1, l.getNOut()});
        }
        return s;
    }

    /** Weights with the layer's weight init (fan-in and fan-out from the shape), biases to {@code biasInit}. */
    @Override
    void initialize(SwiGluLayer layer, String key, INDArray view) {
        if (WEIGHTS.contains(key)) {
            layer.getWeightInitFn().init(view.size(0), view.size(1), view.shape(), 'f', view);
        } else {
            view.assign(layer.getBiasInit());
        }
    }
}
