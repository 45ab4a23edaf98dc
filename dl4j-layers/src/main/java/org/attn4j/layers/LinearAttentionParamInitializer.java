package org.attn4j.layers;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.attn4j.ops.linear.Decay;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.Layer;
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
 * DL4J's weight regularisation and weight noise leave them alone.
 */
public final class LinearAttentionParamInitializer implements ParamInitializer {

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
    /** Gain of the RMS norm over the merged heads {@code [1, H*hs]}. */
    public static final String GAIN = "g";
    /** Output projection weights {@code [H*hs, nOut]}. */
    public static final String WO = "Wo";
    /** Output projection bias {@code [1, nOut]}. */
    public static final String BO = "bo";
    /** Decay logits {@code [1, H]}, {@code lambda = sigmoid(theta)}; only with a learned decay. */
    public static final String THETA = "theta";

    private static final List<String> WEIGHT_KEYS = List.of(WQ, WK, WV, WO);
    private static final List<String> BIAS_KEYS = List.of(BQ, BK, BV, BO);

    private static final LinearAttentionParamInitializer INSTANCE = new LinearAttentionParamInitializer();

    private LinearAttentionParamInitializer() {
    }

    /** The shared, stateless instance. */
    public static LinearAttentionParamInitializer getInstance() {
        return INSTANCE;
    }

    /** Shapes of the parameters in flat-vector order, keyed as {@link #paramKeys}. */
    static Map<String, long[]> shapes(LinearAttentionLayer l) {
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
        s.put(GAIN, new long[] {1, q});
        s.put(WO, new long[] {q, l.getNOut()});
        s.put(BO, new long[] {1, l.getNOut()});
        if (l.isLearnDecay()) {
            s.put(THETA, new long[] {1, l.getNHeads()});
        }
        return s;
    }

    /** Parameter count of the configuration's {@link LinearAttentionLayer}. */
    @Override
    public long numParams(NeuralNetConfiguration conf) {
        return numParams(conf.getLayer());
    }

    /**
     * {@code (nIn + 1)(H + 2 Hkv) hs + H hs + (H hs + 1) nOut}, plus H with a learned decay; the layer must be a
     * LinearAttentionLayer.
     */
    @Override
    public long numParams(Layer layer) {
        long n = 0;
        for (long[] shape : shapes(cast(layer)).values()) {
            n += shape[0] * shape[1];
        }
        return n;
    }

    /** All keys, in flat-vector order; {@code theta} only with a learned decay. */
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
     * weight init (fan-in/fan-out from the weight shape), biases to {@code biasInit}, {@code g} to {@code gainInit},
     * {@code theta} to {@code logit(lambda)} of {@link LinearAttentionLayer#configuredDecay()}.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> init(NeuralNetConfiguration conf, INDArray paramsView, boolean initializeParams) {
        LinearAttentionLayer layer = cast(conf.getLayer());
        Map<String, INDArray> views = slice(layer, paramsView, "parameter");
        // DL4J's own initializers register their keys; BaseLayer.setParams and the optimizer read this list
        for (String key : views.keySet()) {
            conf.addVariable(key);
        }
        if (initializeParams) {
            for (Map.Entry<String, INDArray> e : views.entrySet()) {
                INDArray view = e.getValue();
                switch (e.getKey()) {
                    case GAIN -> view.assign(layer.getGainInit());
                    case THETA -> initDecayLogits(layer.configuredDecay(), view);
                    case BQ, BK, BV, BO -> view.assign(layer.getBiasInit());
                    default -> layer.getWeightInitFn().init(view.size(0), view.size(1), view.shape(), 'f', view);
                }
            }
        }
        return views;
    }

    private static void initDecayLogits(Decay decay, INDArray theta) {
        for (int h = 0; h < theta.length(); h++) {
            double lambda = decay.lambda(h);
            theta.putScalar(0, h, Math.log(lambda / (1 - lambda)));
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

    private static Map<String, INDArray> slice(LinearAttentionLayer layer, INDArray flat, String what) {
        return AttentionSettings.slice("LinearAttentionLayer", layer, shapes(layer), flat, what);
    }

    private static LinearAttentionLayer cast(Layer layer) {
        if (!(layer instanceof LinearAttentionLayer)) {
            throw new IllegalArgumentException("LinearAttentionParamInitializer: expected a LinearAttentionLayer, "
                    + "got " + (layer == null ? "null" : layer.getClass().getName()));
        }
        return (LinearAttentionLayer) layer;
    }
}
