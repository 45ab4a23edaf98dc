package org.attn4j.layers;

import org.deeplearning4j.nn.conf.InputPreProcessor;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.FeedForwardLayer;
import org.deeplearning4j.nn.conf.layers.InputTypeUtil;

/**
 * What the configurations of attn4j's sequence layers share ({@link AttentionLayerBase}, {@link LayerNormLayer},
 * {@link PositionalEmbeddingLayer}): DL4J's recurrent layout ({@code [B, features, N]} NCW or {@code [B, N,
 * features]} NWC), taken from a recurrent input type as DL4J's own recurrent layers do, and the bean property
 * {@code rnnDataFormat} that carries it through JSON (the JSON of each concrete class is what it was when each
 * declared it).
 */
public abstract class RecurrentFeedForwardLayer extends FeedForwardLayer {

    /** Null until set or taken from the input type; {@link #dataFormat()} reads null as NCW. */
    private RNNFormat rnnDataFormat;

    /** For JSON deserialisation of the concrete class. */
    protected RecurrentFeedForwardLayer() {
    }

    /**
     * @param b      the builder of DL4J's settings
     * @param format the configured layout, null for NCW unless the input type says otherwise
     */
    protected RecurrentFeedForwardLayer(FeedForwardLayer.Builder<?> b, RNNFormat format) {
        super(b);
        this.rnnDataFormat = format;
    }

    /** The name used in messages: the layer type, with the layer name in quotes if it has one. */
    abstract String who();

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
}
