package org.attn4j.samples.train;

import java.util.Locale;

import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.LayerNormLayer;
import org.attn4j.layers.LinearAttentionLayer;
import org.attn4j.layers.PositionalEmbeddingLayer;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.distribution.NormalDistribution;
import org.deeplearning4j.nn.conf.graph.ElementWiseVertex;
import org.deeplearning4j.nn.conf.layers.DenseLayer;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.conf.layers.SelfAttentionLayer;
import org.deeplearning4j.nn.conf.layers.recurrent.TimeDistributed;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.weights.WeightInit;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * A GPT-like decoder as a plain DL4J {@link ComputationGraph} configuration, the model of {@code attn4j train}:
 * <pre>
 *   in [B, 1, N] token ids
 *   embed      EmbeddingSequenceLayer(vocab -> d)
 *   pos        PositionalEmbeddingLayer(maxLength, d)        learned, at global positions
 *   block l    x + attention(LayerNorm(x))                     pre-norm, residual
 *              x + W2 GELU(W1 LayerNorm(x))                    MLP 4d, residual
 *   final      LayerNorm -> RnnOutputLayer(d -> vocab, softmax, cross-entropy on the next token)
 * </pre>
 * Attention is {@link FlashAttentionLayer} (causal, GQA), {@link LinearAttentionLayer} (causal, with decay) or, for
 * comparison, DL4J's own {@code SelfAttentionLayer} (a SameDiff layer: no causal mask, and DL4J 1.0.0-M2.1
 * doubles its gradients, see docs/benchmarks.md), in which case the sequence must stay on one worker.
 *
 * @param vocab        vocabulary size
 * @param maxLength    the longest sequence (positional table size)
 * @param width        model width d
 * @param heads        query heads
 * @param kvHeads      key/value heads
 * @param layers       number of blocks
 * @param attention    which attention layer
 * @param type         FLOAT or DOUBLE
 * @param learningRate Adam's learning rate
 * @param seed         initialisation seed
 */
public record GptGraph(int vocab, int maxLength, int width, int heads, int kvHeads, int layers, Attention attention,
                       DataType type, double learningRate, long seed) {

    /** The attention layer of the blocks. */
    public enum Attention {
        /** attn4j's exact flash attention. */
        FLASH,
        /** attn4j's linear attention with decay (LASP's layer). */
        LINEAR,
        /** DL4J's stock SelfAttentionLayer, for comparison. */
        STOCK;

        /** The lower-case name the CLI takes. */
        public String cliName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /**
     * @throws IllegalArgumentException naming the size that does not fit
     */
    public GptGraph {
        if (vocab < 2 || maxLength < 1 || width < 1 || heads < 1 || kvHeads < 1 || layers < 1) {
            throw new IllegalArgumentException("model sizes must be positive (vocab >= 2), got vocab " + vocab
                    + ", max length " + maxLength + ", d-model " + width + ", heads " + heads + ", kv-heads "
                    + kvHeads + ", layers " + layers);
        }
        if (width % heads != 0 || heads % kvHeads != 0) {
            throw new IllegalArgumentException("--d-model " + width + " must be a multiple of --heads " + heads
                    + ", and --heads a multiple of --kv-heads " + kvHeads);
        }
    }

    /** The configuration. */
    public ComputationGraphConfiguration configuration() {
        ComputationGraphConfiguration.GraphBuilder g = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(type).updater(new Adam(learningRate)).weightInit(WeightInit.XAVIER)
                .graphBuilder()
                .addInputs("in")
                .addLayer("embed", new EmbeddingSequenceLayer.Builder().nIn(vocab).nOut(width)
                        .outputDataFormat(RNNFormat.NCW).build(), "in")
                .addLayer("pos", new PositionalEmbeddingLayer.Builder().maxLength(maxLength).width(width).build(),
                        "embed");
        String x = "pos";
        for (int l = 0; l < layers; l++) {
            g.addLayer("ln1_" + l, norm(), x)
                    .addLayer("attn_" + l, attentionLayer(), "ln1_" + l)
                    .addVertex("res1_" + l, new ElementWiseVertex(ElementWiseVertex.Op.Add), x, "attn_" + l)
                    .addLayer("ln2_" + l, norm(), "res1_" + l)
                    .addLayer("mlp1_" + l, new TimeDistributed(new DenseLayer.Builder().nIn(width).nOut(4 * width)
                            .activation(Activation.GELU).build(), RNNFormat.NCW), "ln2_" + l)
                    .addLayer("mlp2_" + l, new TimeDistributed(new DenseLayer.Builder().nIn(4 * width).nOut(width)
                            .activation(Activation.IDENTITY).build(), RNNFormat.NCW), "mlp1_" + l)
                    .addVertex("res2_" + l, new ElementWiseVertex(ElementWiseVertex.Op.Add), "res1_" + l,
                            "mlp2_" + l);
            x = "res2_" + l;
        }
        return g.addLayer("lnf", norm(), x)
                .addLayer("head", new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(width).nOut(vocab).dataFormat(RNNFormat.NCW)
                        // Small output weights (GPT-2's 0.02): a fresh model predicts close to uniform, loss ln V.
                        .weightInit(new NormalDistribution(0, 0.02)).build(),
                        "lnf")
                .setOutputs("head")
                .build();
    }

    /**
     * The network's parameter count, from the sizes alone (without building it, so before ND4J loads): the embedding
     * and positional tables, per block two norms, the attention's projections and the 4d MLP, the final norm and
     * the output layer.
     */
    public long parameterCount() {
        long d = width;
        long headSize = d / heads;
        long q = heads * headSize;
        long kv = kvHeads * headSize;
        long attentionParams = switch (attention) {
            // Wq, Wk, Wv and their biases, Wo and bo (FlashAttentionParamInitializer)
            case FLASH -> (d + 1) * (q + 2 * kv) + q * d + d;
            // the same and a gain per query feature; the decay is fixed (LinearAttentionParamInitializer)
            case LINEAR -> (d + 1) * (q + 2 * kv) + q + q * d + d;
            // DL4J's SelfAttentionLayer with projectInput: Wq, Wk, Wv [heads, d, d / heads], Wo, no biases
            case STOCK -> 3 * d * q + q * d;
        };
        long block = 2 * 2 * d + attentionParams + (d * 4 * d + 4 * d) + (4 * d * d + d);
        return vocab * d + (long) maxLength * d + layers * block + 2 * d + d * vocab + vocab;
    }

    /** A new, initialised network. */
    public ComputationGraph build() {
        ComputationGraph net = new ComputationGraph(configuration());
        net.init();
        return net;
    }

    private Layer norm() {
        return new LayerNormLayer.Builder().nIn(width).nOut(width).build();
    }

    private Layer attentionLayer() {
        return switch (attention) {
            case FLASH -> new FlashAttentionLayer.Builder().nIn(width).nOut(width).nHeads(heads).nKvHeads(kvHeads)
                    .causal(true).build();
            case LINEAR -> new LinearAttentionLayer.Builder().nIn(width).nOut(width).nHeads(heads).nKvHeads(kvHeads)
                    .causal(true).decay(0.99).build();
            case STOCK -> new SelfAttentionLayer.Builder().nIn(width).nOut(width).nHeads(heads).projectInput(true)
                    .build();
        };
    }
}
