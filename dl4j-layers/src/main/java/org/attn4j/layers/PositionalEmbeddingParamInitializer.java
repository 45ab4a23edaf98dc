package org.attn4j.layers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The one parameter of a {@link PositionalEmbeddingLayer}: the table {@code P [maxLength, width]}, a 'c'-order view
 * of the flat vector, so that the row of position {@code p} is the contiguous slice
 * {@code [p*width, (p+1)*width)}. Gradients use the same slicing. {@code P} is a weight (so weight regularization
 * and weight noise apply) and is initialised from {@code N(0, initStd^2)} with ND4J's random generator, which a
 * seeded network has seeded.
 */
public final class PositionalEmbeddingParamInitializer extends LayerParamInitializer<PositionalEmbeddingLayer> {

    /** The position table {@code [maxLength, width]}. */
    public static final String P = "P";

    private static final PositionalEmbeddingParamInitializer INSTANCE = new PositionalEmbeddingParamInitializer();

    private PositionalEmbeddingParamInitializer() {
        super(PositionalEmbeddingLayer.class, List.of(P), List.of());
    }

    /** The shared, stateless instance. */
    public static PositionalEmbeddingParamInitializer getInstance() {
        return INSTANCE;
    }

    /** {@code P [maxLength, width]}. */
    @Override
    Map<String, long[]> shapes(PositionalEmbeddingLayer layer) {
        Map<String, long[]> shapes = new LinkedHashMap<>();
        shapes.put(P, new long[] {layer.getMaxLength(), layer.width()});
        return shapes;
    }

    /** Row {@code p} of {@code P} is the contiguous slice {@code [p*width, (p+1)*width)}. */
    @Override
    char order() {
        return 'c';
    }

    /** {@code P} from {@code N(0, initStd^2)}. */
    @Override
    void initialize(PositionalEmbeddingLayer layer, String key, INDArray view) {
        view.assign(Nd4j.randn(view.dataType(), view.shape()).muli(layer.getInitStd()));
    }
}
