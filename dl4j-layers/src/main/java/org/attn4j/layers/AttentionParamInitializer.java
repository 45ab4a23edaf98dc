package org.attn4j.layers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * What the attention layers' parameter initializers add to {@link LayerParamInitializer}: the projections' keys,
 * which are DL4J's weights and biases, and their initialisation. The flat vector starts with
 * the input projections
 * <pre>
 *   Wq [nIn, H*hs] | bq [1, H*hs] | Wk [nIn, Hkv*hs] | bk [1, Hkv*hs] | Wv [nIn, Hkv*hs] | bv [1, Hkv*hs]
 * </pre>
 * and holds the output projection {@code Wo [H*hs, nOut] | bo [1, nOut]}; a concrete initializer gives the
 * full order in {@code shapes} and initialises any parameter that is neither a weight nor a bias. Weights are
 * 'f'-order views as in DL4J's {@code DefaultParamInitializer}; gradients use the same slicing.
 *
 * @param <L> the layer configuration this initializer serves
 */
public abstract class AttentionParamInitializer<L extends AttentionLayerBase> extends LayerParamInitializer<L> {

    /** Query projection weights {@code [nIn, H*hs]}. */
    public static final String WQ = "Wq";
    /** Query projection bias {@code [1, H*hs]}. */
    public static final String BQ = "bq";
    /** Key projection weights {@code [nIn, Hkv*hs]}. */
    public static final String WK = "Wk";
    /** Key projection bias {@code [1, Hkv*hs]}. */
    public static final String BK = "bk";
    /** Value projection weights {@code [nIn, Hkv*hs]}. */
    public static final String WV = "Wv";
    /** Value projection bias {@code [1, Hkv*hs]}. */
    public static final String BV = "bv";
    /** Output projection weights {@code [H*hs, nOut]}. */
    public static final String WO = "Wo";
    /** Output projection bias {@code [1, nOut]}. */
    public static final String BO = "bo";

    private static final List<String> WEIGHT_KEYS = List.of(WQ, WK, WV, WO);
    private static final List<String> BIAS_KEYS = List.of(BQ, BK, BV, BO);

    /** An initializer for layers of {@code layerClass}, whose simple name appears in messages. */
    AttentionParamInitializer(Class<L> layerClass) {
        super(layerClass, WEIGHT_KEYS, BIAS_KEYS);
    }

    /**
     * The input projections' shapes {@code Wq, bq, Wk, bk, Wv, bv} (the biases only with
     * {@link AttentionLayerBase#isQkvBias()}), in a map to which the caller adds.
     */
    static Map<String, long[]> inputProjectionShapes(AttentionLayerBase l) {
        long nIn = l.getNIn();
        long q = (long) l.getNHeads() * l.effectiveHeadSize();
        long kv = (long) l.getNKvHeads() * l.effectiveHeadSize();
        boolean bias = l.isQkvBias();
        Map<String, long[]> s = new LinkedHashMap<>();
        s.put(WQ, new long[] {nIn, q});
        if (bias) {
            s.put(BQ, new long[] {1, q});
        }
        s.put(WK, new long[] {nIn, kv});
        if (bias) {
            s.put(BK, new long[] {1, kv});
        }
        s.put(WV, new long[] {nIn, kv});
        if (bias) {
            s.put(BV, new long[] {1, kv});
        }
        return s;
    }

    /**
     * Initialises one parameter view: weights with the layer's weight init (fan-in/fan-out from the weight
     * shape), biases to {@code biasInit}. A concrete initializer handles its other parameters first.
     *
     * @param layer the configuration
     * @param key   the parameter's key
     * @param view  the parameter's view, written in place
     * @throws IllegalStateException if the key is neither a weight nor a bias
     */
    @Override
    void initialize(L layer, String key, INDArray view) {
        if (WEIGHT_KEYS.contains(key)) {
            layer.getWeightInitFn().init(view.size(0), view.size(1), view.shape(), 'f', view);
        } else if (BIAS_KEYS.contains(key)) {
            view.assign(layer.getBiasInit());
        } else {
            throw new IllegalStateException(getClass().getSimpleName() + ": no initialisation for parameter "
                    + key);
        }
    }
}
