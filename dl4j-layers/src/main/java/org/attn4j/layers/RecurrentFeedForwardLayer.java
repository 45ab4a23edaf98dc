package org.attn4j.layers;

import java.util.Collection;
import java.util.Objects;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.conf.InputPreProcessor;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.FeedForwardLayer;
import org.deeplearning4j.nn.conf.layers.InputTypeUtil;
import org.deeplearning4j.nn.conf.memory.LayerMemoryReport;
import org.deeplearning4j.nn.conf.memory.MemoryReport;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.activations.impl.ActivationIdentity;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * What the configurations of attn4j's sequence layers share ({@link AttentionLayerBase}, {@link LayerNormLayer},
 * {@link PositionalEmbeddingLayer}): DL4J's recurrent layout ({@code [B, features, N]} NCW or {@code [B, N,
 * features]} NWC), taken from a recurrent input type as DL4J's own recurrent layers do, and the bean property
 * {@code rnnDataFormat} that carries it through JSON (the JSON of each concrete class is what it was when each
 * declared it); validation before instantiation, DL4J's wiring of the implementation (a {@link RowLayerImpl})
 * and the memory report.
 */
public abstract class RecurrentFeedForwardLayer extends FeedForwardLayer {

    /** Null until set or taken from the input type; {@link #dataFormat()} reads null as NCW. */
    private RNNFormat rnnDataFormat;

    /** For JSON deserialisation of the concrete class. */
    protected RecurrentFeedForwardLayer() {
    }

    /**
     * @param b the builder of DL4J's settings and the layout (null for NCW unless the input type says otherwise)
     */
    protected RecurrentFeedForwardLayer(Builder<?> b) {
        super(b);
        this.rnnDataFormat = b.rnnDataFormat;
    }

    /** The concrete layer's name for messages about the layer as a kind, e.g. {@code LayerNormLayer}. */
    abstract String layerType();

    /** The name used in messages: the layer type, with the layer name in quotes if it has one. */
    String who() {
        return AttentionSettings.who(layerType(), layerName);
    }

    /**
     * Checks the settings; with {@code complete} also that the widths are known.
     *
     * @throws IllegalArgumentException naming the setting, the expected and the actual value
     */
    abstract void validate(boolean complete);

    /**
     * Creates the layer implementation over the given parameter view.
     *
     * @throws IllegalArgumentException if the configuration is incomplete or inconsistent
     */
    @Override
    public Layer instantiate(NeuralNetConfiguration conf, Collection<TrainingListener> trainingListeners,
                             int layerIndex, INDArray layerParamsView, boolean initializeParams,
                             DataType networkDataType) {
        validate(true);
        return AttentionSettings.wire(newImplementation(conf, networkDataType), conf, initializer(),
                trainingListeners, layerIndex, layerParamsView, initializeParams);
    }

    /**
     * The concrete implementation for {@link #instantiate}, before DL4J's wiring.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    protected abstract Layer newImplementation(NeuralNetConfiguration conf, DataType dataType);

    /**
     * Approximate: parameters and their updater state, plus per example the working memory of
     * {@link #inferenceMemory} and {@link #trainingMemory}.
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public LayerMemoryReport getMemoryReport(InputType inputType) {
        InputType outputType = getOutputType(-1, inputType);
        long params = initializer().numParams(this);
        long updaterState = getIUpdater() == null ? 0 : getIUpdater().stateSize(params);
        long steps = Math.max(((InputType.InputTypeRecurrent) inputType).getTimeSeriesLength(), 1);
        return new LayerMemoryReport.Builder(layerName, getClass(), inputType, outputType)
                .standardMemory(params, updaterState)
                .workingMemory(0, inferenceMemory(steps), 0, trainingMemory(steps))
                .cacheMemory(MemoryReport.CACHE_MODE_ALL_ZEROS, MemoryReport.CACHE_MODE_ALL_ZEROS)
                .build();
    }

    /**
     * Elements per example an inference forward holds over {@code steps} time steps (at least 1).
     *
     * @param steps the sequence length, 1 when unknown
     */
    protected abstract long inferenceMemory(long steps);

    /**
     * Elements per example a training forward and backward hold over {@code steps} time steps (at least 1).
     *
     * @param steps the sequence length, 1 when unknown
     */
    protected abstract long trainingMemory(long steps);

    /** The layout in use: the configured or input type's format, NCW if neither gave one. */
    public RNNFormat dataFormat() {
        return rnnDataFormat == null ? RNNFormat.NCW : rnnDataFormat;
    }

    /**
     * {@code recurrent(nOut, timeSeriesLength, dataFormat())} ({@code nOut} the input's size while unset).
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public InputType getOutputType(int layerIndex, InputType inputType) {
        InputType.InputTypeRecurrent r = AttentionSettings.requireRecurrent(who(), inputType);
        return InputType.recurrent(nOut > 0 ? nOut : r.getSize(), r.getTimeSeriesLength(), dataFormat());
    }

    /**
     * Takes the width ({@link #takeWidth}) and the data format from a recurrent input type where they are unset or
     * {@code override} is true, as DL4J's recurrent layers do.
     *
     * @throws IllegalStateException if the input is not recurrent
     */
    @Override
    public void setNIn(InputType inputType, boolean override) {
        InputType.InputTypeRecurrent r = AttentionSettings.requireRecurrent(who(), inputType);
        takeWidth(r.getSize(), override);
        if (rnnDataFormat == null || override) {
            this.rnnDataFormat = r.getFormat();
        }
    }

    /**
     * Takes nIn from the input's feature count where unset or {@code override}; a layer whose output width is its
     * input's sets nOut too.
     */
    protected void takeWidth(long size, boolean override) {
        if (nIn <= 0 || override) {
            this.nIn = size;
        }
    }

    /** The preprocessor DL4J's recurrent layers use for this input type (none for recurrent input). */
    @Override
    public InputPreProcessor getPreProcessorForInputType(InputType inputType) {
        return InputTypeUtil.getPreprocessorForInputTypeRnnLayers(inputType, dataFormat(), getLayerName());
    }

    /** Configured layout, NCW {@code [B, features, N]} or NWC {@code [B, N, features]}; null if unset. */
    public RNNFormat getRnnDataFormat() {
        return rnnDataFormat;
    }

    /** Sets the layout of input and output, null for NCW unless the input type says otherwise. */
    public void setRnnDataFormat(RNNFormat rnnDataFormat) {
        this.rnnDataFormat = rnnDataFormat;
    }

    /** Equal when DL4J's settings and the layout are equal; a concrete class adds its own settings. */
    @Override
    public boolean equals(Object o) {
        return o instanceof RecurrentFeedForwardLayer other && super.equals(o)
                && getRnnDataFormat() == other.getRnnDataFormat();
    }

    /** Consistent with {@link #equals}. */
    @Override
    public int hashCode() {
        return Objects.hash(super.hashCode(), getRnnDataFormat());
    }

    /**
     * The setters the builders of attn4j's sequence layers share: the layout, and the identity activation as
     * the default (DL4J's global default, sigmoid, would otherwise apply to a layer whose output is linear).
     *
     * @param <T> the concrete builder, returned by every setter
     */
    public abstract static class Builder<T extends Builder<T>> extends FeedForwardLayer.Builder<T> {
        /** Layout, null for the input type's or NCW. */
        protected RNNFormat rnnDataFormat;

        /** A builder with the identity activation. */
        protected Builder() {
            this.activationFn = new ActivationIdentity();
        }

        /** Input and output layout, NCW or NWC; default the input type's format, else NCW. */
        public T dataFormat(RNNFormat format) {
            this.rnnDataFormat = format;
            return self();
        }

        // unchecked: T is this builder's own class by the declaration Builder<T extends Builder<T>>
        @SuppressWarnings("unchecked")
        T self() {
            return (T) this;
        }
    }
}
