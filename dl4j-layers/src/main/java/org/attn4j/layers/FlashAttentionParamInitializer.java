package org.attn4j.layers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Parameters of a {@link FlashAttentionLayer}, laid out in one flat vector in this order:
 * <pre>
 *   Wq [nIn, H*hs] | bq [1, H*hs] | Wk [nIn, Hkv*hs] | bk [1, Hkv*hs] | Wv [nIn, Hkv*hs] | bv [1, Hkv*hs]
 *   | Wo [H*hs, nOut] | bo [1, nOut]
 * </pre>
 * Weights are 'f'-order views as in DL4J's {@code DefaultParamInitializer}; gradients use the same slicing.
 */
public final class FlashAttentionParamInitializer implements ParamInitializer {

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

    private static final List<String> KEYS = List.of(WQ, BQ, WK, BK, WV, BV, WO, BO);
    private static final List<String> WEIGHT_KEYS = List.of(WQ, WK, WV, WO);
    private static final List<String> BIAS_KEYS = List.of(BQ, BK, BV, BO);

    private static final FlashAttentionParamInitializer INSTANCE = new FlashAttentionParamInitializer();

    private FlashAttentionParamInitializer() {
    }

    /** The shared, stateless instance. */
    public static FlashAttentionParamInitializer getInstance() {
        return INSTANCE;
    }

    /** Shapes of the parameters in flat-vector order, keyed as {@link #paramKeys}. */
    static Map<String, long[]> shapes(FlashAttentionLayer l) {
        long nIn = l.getNIn();
        long q = (long) l.getNHeads() * l.effectiveHeadSize();
        long kv = (long) l.getNKvHeads() * l.effectiveHeadSize();
        Map<String, long[]> s = new LinkedHashMap<>();
        s.put(WQ, new long[] {nIn, q});
        s.put(BQ, new long[] {1, q});
        s.put(WK, new long[] {nIn, kv});
        s.put(BK, new long[] {1, kv});
        s.put(WV, new long[] {nIn, kv});
        s.put(BV, new long[] {1, kv});
        s.put(WO, new long[] {q, l.getNOut()});
        s.put(BO, new long[] {1, l.getNOut()});
        return s;
    }

    /** Parameter count of the configuration's {@link FlashAttentionLayer}. */
    @Override
    public long numParams(NeuralNetConfiguration conf) {
        return numParams(conf.getLayer());
    }

    /** {@code nIn*(H + 2 Hkv)*hs + (H + 2 Hkv)*hs + H*hs*nOut + nOut}; the layer must be a FlashAttentionLayer. */
    @Override
    public long numParams(Layer layer) {
        long n = 0;
        for (long[] shape : shapes(cast(layer)).values()) {
            n += shape[0] * shape[1];
        }
        return n;
    }

    /** All keys, in flat-vector order. */
    @Override
    public List<String> paramKeys(Layer layer) {
        return KEYS;
    }

    /** {@code Wq, Wk, Wv, Wo}. */
    @Override
    public List<String> weightKeys(Layer layer) {
        return WEIGHT_KEYS;
    }

    /** {@code bq, bk, bv, bo}. */
    @Override
    public List<String> biasKeys(Layer layer) {
        return BIAS_KEYS;
    }

    /** Whether {@code key} is one of {@link #weightKeys}. */
    @Override
    public boolean isWeightParam(Layer layer, String key) {
        return WEIGHT_KEYS.contains(key);
    }

    /** Whether {@code key} is one of {@link #biasKeys}. */
    @Override
    public boolean isBiasParam(Layer layer, String key) {
        return BIAS_KEYS.contains(key);
    }

    /**
     * Slices {@code paramsView} into the parameters and, if asked, initialises them (weights with the
     * layer's weight init, fan-in/fan-out from the weight shape; biases to {@code biasInit}).
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> init(NeuralNetConfiguration conf, INDArray paramsView, boolean initializeParams) {
        FlashAttentionLayer layer = cast(conf.getLayer());
        Map<String, INDArray> views = slice(layer, paramsView, "parameter");
        // DL4J's own initializers register their keys; BaseLayer.setParams and the optimizer read this list
        for (String key : KEYS) {
            conf.addVariable(key);
        }
        if (initializeParams) {
            for (Map.Entry<String, INDArray> e : views.entrySet()) {
                INDArray view = e.getValue();
                if (WEIGHT_KEYS.contains(e.getKey())) {
                    layer.getWeightInitFn().init(view.size(0), view.size(1), view.shape(), 'f', view);
                } else {
                    view.assign(layer.getBiasInit());
                }
            }
        }
        return views;
    }

    /**
     * Slices {@code gradientView} exactly as {@link #init} slices the parameters.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> getGradientsFromFlattened(NeuralNetConfiguration conf, INDArray gradientView) {
        return slice(cast(conf.getLayer()), gradientView, "gradient");
    }

    private static Map<String, INDArray> slice(FlashAttentionLayer layer, INDArray flat, String what) {
        return AttentionSettings.slice("FlashAttentionLayer", layer, shapes(layer), flat, what);
    }

    private static FlashAttentionLayer cast(Layer layer) {
        if (!(layer instanceof FlashAttentionLayer)) {
            throw new IllegalArgumentException("FlashAttentionParamInitializer: expected a FlashAttentionLayer, got "
                    + (layer == null ? "null" : layer.getClass().getName()));
        }
        return (FlashAttentionLayer) layer;
    }
}
