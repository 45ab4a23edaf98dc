package org.attn4j.layers;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The one parameter of a {@link PositionalEmbeddingLayer}: the table {@code P [maxLength, width]}, a 'c'-order view
 * of the flat vector, so that the row of position {@code p} is the contiguous slice
 * {@code [p*width, (p+1)*width)}. Gradients use the same slicing. {@code P} is a weight (so weight regularization
 * and weight noise apply) and is initialised from {@code N(0, initStd^2)} with ND4J's random generator, which a
 * seeded network has seeded.
 */
public final class PositionalEmbeddingParamInitializer implements ParamInitializer {

    /** The position table {@code [maxLength, width]}. */
    public static final String P = "P";

    private static final List<String> KEYS = List.of(P);

    private static final PositionalEmbeddingParamInitializer INSTANCE = new PositionalEmbeddingParamInitializer();

    private PositionalEmbeddingParamInitializer() {
    }

    /** The shared, stateless instance. */
    public static PositionalEmbeddingParamInitializer getInstance() {
        return INSTANCE;
    }

    /** {@code maxLength * width}. */
    @Override
    public long numParams(NeuralNetConfiguration conf) {
        return numParams(conf.getLayer());
    }

    /**
     * {@code maxLength * width}.
     *
     * @throws IllegalArgumentException if the layer is not a PositionalEmbeddingLayer
     */
    @Override
    public long numParams(Layer layer) {
        PositionalEmbeddingLayer l = cast(layer);
        return (long) l.getMaxLength() * l.width();
    }

    /** {@code [P]}. */
    @Override
    public List<String> paramKeys(Layer layer) {
        return KEYS;
    }

    /** {@code [P]}: the table counts as a weight. */
    @Override
    public List<String> weightKeys(Layer layer) {
        return KEYS;
    }

    /** None. */
    @Override
    public List<String> biasKeys(Layer layer) {
        return List.of();
    }

    /** Whether {@code key} is {@link #P}. */
    @Override
    public boolean isWeightParam(Layer layer, String key) {
        return P.equals(key);
    }

    /** False: the layer has no bias. */
    @Override
    public boolean isBiasParam(Layer layer, String key) {
        return false;
    }

    /**
     * Shapes {@code paramsView} into {@code P} and, if asked, draws it from {@code N(0, initStd^2)}.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> init(NeuralNetConfiguration conf, INDArray paramsView, boolean initializeParams) {
        PositionalEmbeddingLayer layer = cast(conf.getLayer());
        INDArray p = view(layer, paramsView, "parameter");
        // DL4J's own initializers register their keys; BaseLayer.setParams and the optimizer read this list
        conf.addVariable(P);
        if (initializeParams) {
            p.assign(Nd4j.randn(p.dataType(), p.shape()).muli(layer.getInitStd()));
        }
        return single(p);
    }

    /**
     * Shapes {@code gradientView} exactly as {@link #init} shapes the parameters.
     *
     * @throws IllegalArgumentException if the view's length is not {@link #numParams(Layer)}
     */
    @Override
    public Map<String, INDArray> getGradientsFromFlattened(NeuralNetConfiguration conf, INDArray gradientView) {
        return single(view(cast(conf.getLayer()), gradientView, "gradient"));
    }

    /** {@code P -> p} in a mutable map (DL4J may add entries to a layer's parameter table). */
    private static Map<String, INDArray> single(INDArray p) {
        Map<String, INDArray> out = new LinkedHashMap<>();
        out.put(P, p);
        return out;
    }

    /** {@code flat} as a {@code [maxLength, width]} view after a length check. */
    private static INDArray view(PositionalEmbeddingLayer layer, INDArray flat, String what) {
        long expected = (long) layer.getMaxLength() * layer.width();
        if (flat.length() != expected) {
            throw new IllegalArgumentException("PositionalEmbeddingParamInitializer: " + what + " view must have "
                    + "length " + expected + " (maxLength x width) for " + layer + ", got " + flat.length()
                    + " (shape " + Arrays.toString(flat.shape()) + ")");
        }
        return flat.reshape(flat.length()).reshape('c', layer.getMaxLength(), layer.width());
    }

    private static PositionalEmbeddingLayer cast(Layer layer) {
        if (!(layer instanceof PositionalEmbeddingLayer l)) {
            throw new IllegalArgumentException("PositionalEmbeddingParamInitializer: expected a "
                    + "PositionalEmbeddingLayer, got " + (layer == null ? "null" : layer.getClass().getName()));
        }
        return l;
    }
}
