package org.attn4j.layers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * Parameters of a {@link LayerNormLayer}, laid out in one flat vector in this order:
 * <pre>
 *   g [1, width] | b [1, width]      (b only for LayerNorm, not for RMSNorm)
 * </pre>
 * The gain {@code g} starts at the layer's {@code gainInit} (DL4J's setting for layer-norm gains, 1 unless set)
 * and the bias {@code b} at 0, so a new norm only standardises. The network's weight init and bias init do not
 * apply. Neither is a weight or a bias to DL4J, so its weight regularisation (L1, L2, weight decay) and weight
 * noise leave them alone, as is usual for norm parameters. Gradients use the same slicing.
 */
public final class LayerNormParamInitializer implements ParamInitializer {

    /** The gain {@code [1, width]}. */
    public static final String GAIN = "g";
    /** The bias {@code [1, width]}; LayerNorm only. */
    public static final String BIAS = "b";

    private static final List<String> LAYER_NORM_KEYS = List.of(GAIN, BIAS);
    private static final List<String> RMS_NORM_KEYS = List.of(GAIN);

    private static final LayerNormParamInitializer INSTANCE = new LayerNormParamInitializer();

    private LayerNormParamInitializer() {
    }

    /** The shared, stateless instance. */
    public static LayerNormParamInitializer getInstance() {
        return INSTANCE;
    }

    /** Parameter count of the configuration's layer. */
    @Override
    public long numParams(NeuralNetConfiguration conf) {
        return numParams(conf.getLayer());
    }

    /**
     * {@code width} for RMSNorm, {@code 2 * width} for LayerNorm.
     *
     * @throws IllegalArgumentException if the layer is not a {@link LayerNormLayer}
     */
    @Override
    public long numParams(Layer layer) {
        LayerNormLayer l = cast(layer);
        return paramKeys(l).size() * l.width();
    }

    /**
     * {@code g, b} for LayerNorm, {@code g} for RMSNorm, in flat-vector order.
     *
     * @throws IllegalArgumentException if the layer is not a {@link LayerNormLayer}
     */
    @Override
    public List<String> paramKeys(Layer layer) {
        return cast(layer).isRms() ? RMS_NORM_KEYS : LAYER_NORM_KEYS;
    }

    /** None: see the class comment. */
    @Override
    public List<String> weightKeys(Layer layer) {
        return List.of();
    }

    /** None: see the class comment. */
    @Override
    public List<String> biasKeys(Layer layer) {
        return List.of();
    }

    /** False: see the class comment. */
    @Override
    public boolean isWeightParam(Layer layer, String key) {
        return false;
    }

    /** False: see the class comment. */
    @Override
    public boolean isBiasParam(Layer layer, String key) {
        return false;
    }

    /**
     * Slices {@code paramsView} into {@code g} (and {@code b}) and, if asked, sets {@code g} to the layer's
     * {@code gainInit} (1 when unset) and {@code b} to 0.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> init(NeuralNetConfiguration conf, INDArray paramsView, boolean initializeParams) {
        LayerNormLayer layer = cast(conf.getLayer());
        Map<String, INDArray> views = slice(layer, paramsView, "parameter");
        // DL4J's own initializers register their keys; BaseLayer.setParams and the optimizer read this list
        for (String key : views.keySet()) {
            conf.addVariable(key);
        }
        if (initializeParams) {
            double gain = Double.isNaN(layer.getGainInit()) ? 1.0 : layer.getGainInit();
            views.get(GAIN).assign(gain);
            if (views.containsKey(BIAS)) {
                views.get(BIAS).assign(0.0);
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

    private Map<String, INDArray> slice(LayerNormLayer layer, INDArray flat, String what) {
        Map<String, long[]> shapes = new LinkedHashMap<>();
        for (String key : paramKeys(layer)) {
            shapes.put(key, new long[] {1, layer.width()});
        }
        return AttentionSettings.slice(getClass().getSimpleName(), layer, shapes, flat, what);
    }

    private LayerNormLayer cast(Layer layer) {
        if (!(layer instanceof LayerNormLayer l)) {
            throw new IllegalArgumentException(getClass().getSimpleName() + ": expected a LayerNormLayer, got "
                    + (layer == null ? "null" : layer.getClass().getName()));
        }
        return l;
    }
}
