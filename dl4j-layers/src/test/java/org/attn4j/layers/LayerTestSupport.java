package org.attn4j.layers;

import java.util.Random;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.FeedForwardLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.IUpdater;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/** Networks and seeded data shared by the layer tests. */
final class LayerTestSupport {

    static final long SEED = 20240611L;
    static final int CLASSES = 3;

    private LayerTestSupport() {
    }

    /** The data format of a {@link FlashAttentionLayer} or {@link LinearAttentionLayer}. */
    static RNNFormat formatOf(FeedForwardLayer attention) {
        if (attention instanceof LinearAttentionLayer l) {
            return l.dataFormat();
        }
        return ((FlashAttentionLayer) attention).dataFormat();
    }

    /** [attention layer, RnnOutputLayer(softmax, MCXENT)] in the layer's data format. */
    static MultiLayerConfiguration mlnConf(FeedForwardLayer attention, DataType dataType, IUpdater updater,
                                           long seed) {
        RNNFormat format = formatOf(attention);
        return new NeuralNetConfiguration.Builder()
                .seed(seed)
                .dataType(dataType)
                .updater(updater)
                .weightInit(WeightInit.XAVIER)
                .list()
                .layer(attention)
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(attention.getNOut()).nOut(CLASSES)
                        .dataFormat(format).build())
                .setInputType(InputType.recurrent(attention.getNIn(), format))
                .build();
    }

    static MultiLayerNetwork mln(FeedForwardLayer attention, DataType dataType, IUpdater updater, long seed) {
        MultiLayerNetwork net = new MultiLayerNetwork(mlnConf(attention, dataType, updater, seed));
        net.init();
        return net;
    }

    /** in -> "attn" (the attention layer) -> "out" (RnnOutputLayer). */
    static ComputationGraphConfiguration graphConf(FeedForwardLayer attention, DataType dataType,
                                                   IUpdater updater, long seed) {
        RNNFormat format = formatOf(attention);
        return new NeuralNetConfiguration.Builder()
                .seed(seed)
                .dataType(dataType)
                .updater(updater)
                .weightInit(WeightInit.XAVIER)
                .graphBuilder()
                .addInputs("in")
                .setInputTypes(InputType.recurrent(attention.getNIn(), format))
                .addLayer("attn", attention, "in")
                .addLayer("out", new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(attention.getNOut()).nOut(CLASSES)
                        .dataFormat(format).build(), "attn")
                .setOutputs("out")
                .build();
    }

    static ComputationGraph graph(FeedForwardLayer attention, DataType dataType, IUpdater updater, long seed) {
        ComputationGraph net = new ComputationGraph(graphConf(attention, dataType, updater, seed));
        net.init();
        return net;
    }

    /** Gaussian features in {@code format}: {@code [B, f, N]} (NCW) or {@code [B, N, f]} (NWC). */
    static INDArray features(Random rnd, DataType dataType, RNNFormat format, int b, int f, int n) {
        double[] values = new double[b * f * n];
        for (int i = 0; i < values.length; i++) {
            values[i] = rnd.nextGaussian();
        }
        long[] shape = format == RNNFormat.NCW ? new long[] {b, f, n} : new long[] {b, n, f};
        return Nd4j.create(values, shape, 'c').castTo(dataType);
    }

    /** One-hot labels with {@link #CLASSES} classes in {@code format}. */
    static INDArray oneHotLabels(Random rnd, DataType dataType, RNNFormat format, int b, int n) {
        long[] shape = format == RNNFormat.NCW ? new long[] {b, CLASSES, n} : new long[] {b, n, CLASSES};
        INDArray labels = Nd4j.zeros(dataType, shape);
        for (int i = 0; i < b; i++) {
            for (int t = 0; t < n; t++) {
                int c = rnd.nextInt(CLASSES);
                if (format == RNNFormat.NCW) {
                    labels.putScalar(new long[] {i, c, t}, 1.0);
                } else {
                    labels.putScalar(new long[] {i, t, c}, 1.0);
                }
            }
        }
        return labels;
    }

    /**
     * Mask {@code [B, N]} with padding at the end: sequence {@code i} loses {@code (i + 1) % 3} steps, so a
     * batch of one is padded too and a batch of three mixes lengths.
     */
    static INDArray endPaddingMask(DataType dataType, int b, int n) {
        INDArray mask = Nd4j.ones(dataType, b, n);
        for (int i = 0; i < b; i++) {
            int pad = (i + 1) % 3;
            for (int t = n - pad; t < n; t++) {
                mask.putScalar(i, t, 0.0);
            }
        }
        return mask;
    }

    /** A small attention layer; callers adjust the builder. */
    static FlashAttentionLayer.Builder attention(int nIn, int nOut, int nHeads) {
        return new FlashAttentionLayer.Builder().nIn(nIn).nOut(nOut).nHeads(nHeads);
    }

    /** A small linear attention layer; callers adjust the builder. */
    static LinearAttentionLayer.Builder linear(int nIn, int nOut, int nHeads) {
        return new LinearAttentionLayer.Builder().nIn(nIn).nOut(nOut).nHeads(nHeads);
    }
}
