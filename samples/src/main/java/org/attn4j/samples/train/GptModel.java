package org.attn4j.samples.train;

import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.LinearAttentionLayer;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.DenseLayer;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.conf.layers.recurrent.TimeDistributed;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * A small GPT-like language model as a DL4J {@link MultiLayerNetwork}: token embedding, {@code blocks} blocks of
 * [causal attention, position-wise tanh layer], and a softmax over the vocabulary trained with cross-entropy on
 * the next token at every position. Inputs {@code [B, 1, N]} token ids, labels {@code [B, vocab, N]} one-hot.
 *
 * @param vocab    vocabulary size
 * @param width    model width (embedding and layer size)
 * @param heads    query heads; {@code width} must be a multiple
 * @param kvHeads  key/value heads (GQA), dividing {@code heads}
 * @param blocks   number of blocks
 * @param linear   linear attention with decay (LASP's layer) instead of softmax attention
 * @param type     FLOAT or DOUBLE
 * @param learningRate Adam's learning rate
 * @param seed     weight initialisation seed
 */
public record GptModel(int vocab, int width, int heads, int kvHeads, int blocks, boolean linear, DataType type,
                       double learningRate, long seed) {

    /**
     * @throws IllegalArgumentException naming the size that does not fit
     */
    public GptModel {
        if (vocab < 2 || width < 1 || heads < 1 || blocks < 1 || kvHeads < 1) {
            throw new IllegalArgumentException("GptModel: vocab >= 2 and width, heads, kvHeads, blocks >= 1, got "
                    + vocab + ", " + width + ", " + heads + ", " + kvHeads + ", " + blocks);
        }
        if (width % heads != 0 || heads % kvHeads != 0) {
            throw new IllegalArgumentException("GptModel: width " + width + " must be a multiple of heads " + heads
                    + ", and heads a multiple of kvHeads " + kvHeads);
        }
        if (type != DataType.FLOAT && type != DataType.DOUBLE) {
            throw new IllegalArgumentException("GptModel: FLOAT or DOUBLE, got " + type);
        }
    }

    /** The configuration. */
    public MultiLayerConfiguration configuration() {
        NeuralNetConfiguration.ListBuilder list = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(type).updater(new Adam(learningRate)).weightInit(WeightInit.XAVIER).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(vocab).nOut(width).outputDataFormat(RNNFormat.NCW)
                        .build());
        for (int b = 0; b < blocks; b++) {
            list.layer(attention()).layer(new TimeDistributed(new DenseLayer.Builder().nIn(width).nOut(width)
                    .activation(Activation.TANH).build(), RNNFormat.NCW));
        }
        return list.layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                .nIn(width).nOut(vocab).dataFormat(RNNFormat.NCW).build()).build();
    }

    /** A new, initialised network. */
    public MultiLayerNetwork build() {
        MultiLayerNetwork net = new MultiLayerNetwork(configuration());
        net.init();
        return net;
    }

    private Layer attention() {
        if (linear) {
            return new LinearAttentionLayer.Builder().nIn(width).nOut(width).nHeads(heads).nKvHeads(kvHeads)
                    .causal(true).decay(0.95).build();
        }
        return new FlashAttentionLayer.Builder().nIn(width).nOut(width).nHeads(heads).nKvHeads(kvHeads).causal(true)
                .build();
    }
}
