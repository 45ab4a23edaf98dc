package org.attn4j.layers;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * What the attention layers' parameter initializers share: the projections' keys, slicing the flat parameter
 * and gradient vectors after a length check, and initialising weights and biases. The flat vector starts with
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
public abstract class AttentionParamInitializer<L extends AttentionLayerBase> implements ParamInitializer {

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

    private final Class<L> layerClass;

    /** An initializer for layers of {@code layerClass}, whose simple name appears in messages. */
    AttentionParamInitializer(Class<L> layerClass) {
        this.layerClass = layerClass;
    }

    /** Shapes of the parameters in flat-vector order, keyed as {@link #paramKeys}. */
    abstract Map<String, long[]> shapes(L layer);

    /** The input projections' shapes {@code Wq, bq, Wk, bk, Wv, bv}, in a map to which the caller adds. */
    static Map<String, long[]> inputProjectionShapes(AttentionLayerBase l) {
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
        return s;
    }

    /** Parameter count of the configuration's layer. */
    @Override
    public long numParams(NeuralNetConfiguration conf) {
        return numParams(conf.getLayer());
    }

    /**
     * The sum of the sizes of the parameters in flat-vector order.
     *
     * @throws IllegalArgumentException if the layer is not of this initializer's class
     */
    @Override
    public long numParams(Layer layer) {
        long n = 0;
        for (long[] shape : shapes(cast(layer)).values()) {
            n += shape[0] * shape[1];
        }
        return n;
    }

    /**
     * All keys, in flat-vector order.
     *
     * @throws IllegalArgumentException if the layer is not of this initializer's class
     */
    @Override
    public List<String> paramKeys(Layer layer) {
        return new ArrayList<>(shapes(cast(layer)).keySet());
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
     * Slices {@code paramsView} into the parameters and, if asked, initialises them: weights with the layer's
     * weight init (fan-in/fan-out from the weight shape), biases to {@code biasInit}, any other parameter as the
     * concrete initializer says.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> init(NeuralNetConfiguration conf, INDArray paramsView, boolean initializeParams) {
        L layer = cast(conf.getLayer());
        Map<String, INDArray> views = slice(layer, paramsView, "parameter");
        // DL4J's own initializers register their keys; BaseLayer.setParams and the optimizer read this list
        for (String key : views.keySet()) {
            conf.addVariable(key);
        }
        if (initializeParams) {
            for (Map.Entry<String, INDArray> e : views.entrySet()) {
                initialize(layer, e.getKey(), e.getValue());
            }
        }
        return views;
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

    /**
     * Slices {@code gradientView} exactly as {@link #init} slices the parameters.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> getGradientsFromFlattened(NeuralNetConfiguration conf, INDArray gradientView) {
        return slice(cast(conf.getLayer()), gradientView, "gradient");
    }

    private Map<String, INDArray> slice(L layer, INDArray flat, String what) {
        return AttentionSettings.slice(layerClass.getSimpleName(), layer, shapes(layer), flat, what);
    }

    /** The layer as this initializer's class; {@code IllegalArgumentException} naming both if it is not. */
    L cast(Layer layer) {
        if (!layerClass.isInstance(layer)) {
            throw new IllegalArgumentException(getClass().getSimpleName() + ": expected a "
                    + layerClass.getSimpleName() + ", got " + (layer == null ? "null" : layer.getClass().getName()));
        }
        return layerClass.cast(layer);
    }
}
