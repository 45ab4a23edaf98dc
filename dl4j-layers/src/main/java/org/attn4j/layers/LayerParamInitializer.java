package org.attn4j.layers;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * What the parameter initializers of attn4j's layers share: the parameters as views of the flat parameter and
 * gradient vectors, sliced in one order after a length check, their registration with DL4J and their
 * initialisation, one key at a time. A concrete initializer gives the shapes in flat-vector order, which keys are
 * weights and biases to DL4J, and how each parameter starts.
 *
 * @param <L> the layer configuration this initializer serves
 */
public abstract class LayerParamInitializer<L extends Layer> implements ParamInitializer {

    private final Class<L> layerClass;
    private final List<String> weightKeys;
    private final List<String> biasKeys;

    /**
     * @param layerClass the layers it serves, whose simple name appears in messages
     * @param weightKeys the keys DL4J treats as weights (regularisation, weight noise)
     * @param biasKeys   the keys DL4J treats as biases
     */
    LayerParamInitializer(Class<L> layerClass, List<String> weightKeys, List<String> biasKeys) {
        this.layerClass = layerClass;
        this.weightKeys = weightKeys;
        this.biasKeys = biasKeys;
    }

    /** Shapes of the parameters in flat-vector order, keyed as {@link #paramKeys}. */
    abstract Map<String, long[]> shapes(L layer);

    /**
     * Initialises one parameter view in place.
     *
     * @param layer the configuration
     * @param key   the parameter's key
     * @param view  the parameter's view
     */
    abstract void initialize(L layer, String key, INDArray view);

    /** The order of the views over the flat vector: 'f' (as DL4J's own weights) unless overridden. */
    char order() {
        return 'f';
    }

    /** Parameter count of the configuration's layer. */
    @Override
    public long numParams(NeuralNetConfiguration conf) {
        return numParams(conf.getLayer());
    }

    /**
     * The sum of the sizes of the parameters.
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

    /** The keys DL4J treats as weights. */
    @Override
    public List<String> weightKeys(Layer layer) {
        return weightKeys;
    }

    /** The keys DL4J treats as biases. */
    @Override
    public List<String> biasKeys(Layer layer) {
        return biasKeys;
    }

    /** Whether {@code key} is one of {@link #weightKeys}. */
    @Override
    public boolean isWeightParam(Layer layer, String key) {
        return weightKeys.contains(key);
    }

    /** Whether {@code key} is one of {@link #biasKeys}. */
    @Override
    public boolean isBiasParam(Layer layer, String key) {
        return biasKeys.contains(key);
    }

    /**
     * Slices {@code paramsView} into the parameters, registers their keys and, if asked, initialises each.
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
     * Slices {@code gradientView} exactly as {@link #init} slices the parameters.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> getGradientsFromFlattened(NeuralNetConfiguration conf, INDArray gradientView) {
        return slice(cast(conf.getLayer()), gradientView, "gradient");
    }

    private Map<String, INDArray> slice(L layer, INDArray flat, String what) {
        return AttentionSettings.slice(getClass().getSimpleName(), layer, shapes(layer), flat, what, order());
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
