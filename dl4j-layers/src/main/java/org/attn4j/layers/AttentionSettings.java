package org.attn4j.layers;

import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.ParamInitializer;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.indexing.NDArrayIndex;

/**
 * Checks and wiring the attention layer configurations share: head counts and sizes, nIn/nOut, the
 * recurrent input type, slicing the flat parameter vector, and handing a new implementation its views.
 */
final class AttentionSettings {

    private AttentionSettings() {
    }

    /**
     * Checks the head settings; with {@code complete} also that nIn and nOut are known.
     *
     * @param who the layer's name for messages, e.g. {@code FlashAttentionLayer "attn1"}
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    static void validateHeads(String who, int nHeads, int nKvHeads, int headSize, long nIn, long nOut,
                              boolean complete) {
        require(nHeads > 0, who + ": nHeads must be > 0, got " + nHeads);
        require(nKvHeads > 0, who + ": nKvHeads must be > 0, got " + nKvHeads);
        require(nHeads % nKvHeads == 0,
                who + ": nHeads (" + nHeads + ") must be a multiple of nKvHeads (" + nKvHeads + ")");
        require(headSize >= 0, who + ": headSize must be > 0 (or 0 for nOut / nHeads), got " + headSize);
        require(nIn >= 0, who + ": nIn must be > 0, got " + nIn);
        require(nOut >= 0, who + ": nOut must be > 0, got " + nOut);
        if (headSize == 0 && nOut > 0) {
            require(nOut % nHeads == 0, who + ": nOut (" + nOut + ") must be a multiple of nHeads (" + nHeads
                    + ") when headSize is not set");
        }
        if (complete) {
            require(nIn > 0, who + ": nIn must be > 0, got " + nIn + " (set it or give an input type)");
            require(nOut > 0, who + ": nOut must be > 0, got " + nOut);
        }
    }

    /** The name used in messages: the class's simple name, with the layer name in quotes if it has one. */
    static String who(String type, String layerName) {
        return layerName == null ? type : type + " \"" + layerName + "\"";
    }

    /** @throws IllegalArgumentException with {@code message} unless {@code ok} */
    static void require(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException(message);
        }
    }

    /** @throws IllegalStateException unless {@code inputType} is recurrent */
    static InputType.InputTypeRecurrent requireRecurrent(String who, InputType inputType) {
        if (inputType == null || inputType.getType() != InputType.Type.RNN) {
            throw new IllegalStateException(who + ": expected a recurrent input type, got " + inputType);
        }
        return (InputType.InputTypeRecurrent) inputType;
    }

    /** Gives a new implementation its listeners, index, parameter view and (initialised) parameter table. */
    static <L extends Layer> L wire(L layer, NeuralNetConfiguration conf, ParamInitializer initializer,
                                    Collection<TrainingListener> listeners, int index, INDArray paramsView,
                                    boolean initializeParams) {
        layer.setListeners(listeners);
        layer.setIndex(index);
        layer.setParamsViewArray(paramsView);
        layer.setParamTable(initializer.init(conf, paramsView, initializeParams));
        layer.setConf(conf);
        return layer;
    }

    /**
     * Slices a flat parameter or gradient vector into views of the given 2-d shapes, in order.
     *
     * @param who    the initializer's name for messages
     * @param layer  the configuration, for messages
     * @param what   "parameter" or "gradient", for messages
     * @param order  the views' order, 'f' or 'c'
     * @return a mutable, insertion-ordered map (DL4J may add entries and iterates it in flat-vector order)
     * @throws IllegalArgumentException if the vector's length is not the sum of the shapes' sizes
     */
    static Map<String, INDArray> slice(String who, Object layer, Map<String, long[]> shapes, INDArray flat,
                                       String what, char order) {
        long expected = 0;
        for (long[] shape : shapes.values()) {
            expected += shape[0] * shape[1];
        }
        if (flat.length() != expected) {
            throw new IllegalArgumentException(who + ": " + what + " view must have length " + expected + " for "
                    + layer + ", got " + flat.length() + " (shape " + Arrays.toString(flat.shape()) + ")");
        }
        INDArray vector = flat.reshape(flat.length());
        Map<String, INDArray> out = new LinkedHashMap<>();
        long offset = 0;
        for (Map.Entry<String, long[]> e : shapes.entrySet()) {
            long[] shape = e.getValue();
            long len = shape[0] * shape[1];
            out.put(e.getKey(), vector.get(NDArrayIndex.interval(offset, offset + len)).reshape(order, shape));
            offset += len;
        }
        return out;
    }
}
