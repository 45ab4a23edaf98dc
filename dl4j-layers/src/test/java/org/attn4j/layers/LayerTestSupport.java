package org.attn4j.layers;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.weights.WeightInit;
import org.junit.jupiter.api.function.Executable;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.IUpdater;
import org.nd4j.linalg.learning.config.NoOp;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/** Networks, seeded data and assertions shared by the layer tests. */
final class LayerTestSupport {

    static final long SEED = 20240611L;
    static final int CLASSES = 3;

    private LayerTestSupport() {
    }

    /** [attention layer, RnnOutputLayer(softmax, MCXENT) with {@link #CLASSES} classes] in the layer's format. */
    static MultiLayerConfiguration mlnConf(AttentionLayerBase attention, DataType dataType, IUpdater updater,
                                           long seed) {
        return mlnConf(attention, dataType, updater, seed, CLASSES);
    }

    /** [attention layer, RnnOutputLayer(softmax, MCXENT) with {@code classes} classes] in the layer's format. */
    static MultiLayerConfiguration mlnConf(AttentionLayerBase attention, DataType dataType, IUpdater updater,
                                           long seed, int classes) {
        return network(dataType, updater, seed)
                .list()
                .layer(attention)
                .layer(outputLayer(attention, classes))
                .setInputType(InputType.recurrent(attention.getNIn(), attention.dataFormat()))
                .build();
    }

    static MultiLayerNetwork mln(AttentionLayerBase attention, DataType dataType, IUpdater updater, long seed) {
        return mln(attention, dataType, updater, seed, CLASSES);
    }

    static MultiLayerNetwork mln(AttentionLayerBase attention, DataType dataType, IUpdater updater, long seed,
                                 int classes) {
        MultiLayerNetwork net = new MultiLayerNetwork(mlnConf(attention, dataType, updater, seed, classes));
        net.init();
        return net;
    }

    /** in -> "attn" (the attention layer) -> "out" (RnnOutputLayer). */
    static ComputationGraphConfiguration graphConf(AttentionLayerBase attention, DataType dataType,
                                                   IUpdater updater, long seed) {
        return network(dataType, updater, seed)
                .graphBuilder()
                .addInputs("in")
                .setInputTypes(InputType.recurrent(attention.getNIn(), attention.dataFormat()))
                .addLayer("attn", attention, "in")
                .addLayer("out", outputLayer(attention, CLASSES), "attn")
                .setOutputs("out")
                .build();
    }

    static ComputationGraph graph(AttentionLayerBase attention, DataType dataType, IUpdater updater, long seed) {
        ComputationGraph net = new ComputationGraph(graphConf(attention, dataType, updater, seed));
        net.init();
        return net;
    }

    /**
     * The attention layers in a row (no input type, so each keeps its configured format) under an
     * RnnOutputLayer with {@link #CLASSES} classes.
     */
    static MultiLayerNetwork stack(DataType dataType, IUpdater updater, long seed, AttentionLayerBase... layers) {
        NeuralNetConfiguration.ListBuilder list = network(dataType, updater, seed).list();
        for (AttentionLayerBase layer : layers) {
            list.layer(layer);
        }
        MultiLayerNetwork net = new MultiLayerNetwork(list.layer(outputLayer(layers[layers.length - 1], CLASSES))
                .build());
        net.init();
        return net;
    }

    /** The layer alone in a network, NoOp updater, Xavier weights, biases 0.1 (so that they matter). */
    static MultiLayerNetwork alone(AttentionLayerBase layer, DataType dataType, long seed) {
        MultiLayerNetwork net = new MultiLayerNetwork(network(dataType, new NoOp(), seed).biasInit(0.1).list()
                .layer(layer).build());
        net.init();
        return net;
    }

    /** The network settings every test network shares: seed, data type, updater, Xavier weights. */
    static NeuralNetConfiguration.Builder network(DataType dataType, IUpdater updater, long seed) {
        return new NeuralNetConfiguration.Builder()
                .seed(seed)
                .dataType(dataType)
                .updater(updater)
                .weightInit(WeightInit.XAVIER);
    }

    /** Softmax over {@code classes} with MCXENT on top of {@code below}, in its format. */
    static RnnOutputLayer outputLayer(AttentionLayerBase below, int classes) {
        return new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                .activation(Activation.SOFTMAX).nIn(below.getNOut()).nOut(classes)
                .dataFormat(below.dataFormat()).build();
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

    /**
     * One-hot tokens {@code [batch, vocab, n]} (NCW) and two-class labels: the label at step t is 1 iff token 0
     * occurs at some step {@code <= t}, which a causal layer can only learn from earlier steps.
     */
    static DataSet seenTokenZeroTask(Random rnd, int batch, int vocab, int n) {
        INDArray x = Nd4j.zeros(DataType.FLOAT, batch, vocab, n);
        INDArray y = Nd4j.zeros(DataType.FLOAT, batch, 2, n);
        for (int b = 0; b < batch; b++) {
            boolean seen = false;
            for (int t = 0; t < n; t++) {
                int token = rnd.nextDouble() < 0.1 ? 0 : 1 + rnd.nextInt(vocab - 1);
                seen |= token == 0;
                x.putScalar(new long[] {b, token, t}, 1.0);
                y.putScalar(new long[] {b, seen ? 1 : 0, t}, 1.0);
            }
        }
        return new DataSet(x, y);
    }

    /** Asserts that {@code run} throws {@code type} with a message containing every one of {@code parts}. */
    static void assertFailsWith(Class<? extends Throwable> type, Executable run, String... parts) {
        Throwable e = assertThrows(type, run);
        for (String part : parts) {
            assertTrue(e.getMessage().contains(part), "message \"" + e.getMessage() + "\" lacks \"" + part + "\"");
        }
    }

    /** Asserts equal shapes and bit-identical values (compared in float64). */
    static void assertIdentical(INDArray expected, INDArray actual, String what) {
        assertArrayEquals(expected.shape(), actual.shape(), what + ": shape");
        assertArrayEquals(expected.castTo(DataType.DOUBLE).reshape(expected.length()).toDoubleVector(),
                actual.castTo(DataType.DOUBLE).reshape(actual.length()).toDoubleVector(), what);
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
