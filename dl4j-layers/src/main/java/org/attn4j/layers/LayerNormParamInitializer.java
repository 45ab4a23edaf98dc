package org.attn4j.layers;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

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
public final class LayerNormParamInitializer extends LayerParamInitializer<LayerNormLayer> {

    /** The gain {@code [1, width]}. */
    public static final String GAIN = "g";
    /** The bias {@code [1, width]}; LayerNorm only. */
    public static final String BIAS = "b";

    private static final LayerNormParamInitializer INSTANCE = new LayerNormParamInitializer();

    private LayerNormParamInitializer() {
        // Neither parameter is a weight or a bias to DL4J: see the class comment.
        super(LayerNormLayer.class, List.of(), List.of());
    }

    /** The shared, stateless instance. */
    public static LayerNormParamInitializer getInstance() {
        return INSTANCE;
    }

    /** {@code g} (and {@code b} for LayerNorm), each {@code [1, width]}. */
    @Override
    Map<String, long[]> shapes(LayerNormLayer layer) {
        Map<String, long[]> shapes = new LinkedHashMap<>();
        shapes.put(GAIN, new long[] {1, layer.width()});
        if (!layer.isRms()) {
            shapes.put(BIAS, new long[] {1, layer.width()});
        }
        return shapes;
    }

    /** {@code g} at the layer's {@code gainInit} (1 when unset), {@code b} at 0. */
    @Override
    void initialize(LayerNormLayer layer, String key, INDArray view) {
        view.assign(GAIN.equals(key) ? (Double.isNaN(layer.getGainInit()) ? 1.0 : layer.getGainInit()) : 0.0);
    }
}
