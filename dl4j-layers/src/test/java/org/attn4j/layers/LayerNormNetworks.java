package org.attn4j.layers;

import java.util.Random;
import java.util.function.BiConsumer;
import java.util.function.Function;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.graph.ElementWiseVertex;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.IUpdater;
import org.nd4j.linalg.learning.config.NoOp;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/** Networks around {@link LayerNormLayer} for its tests, on {@link LayerTestSupport}'s network settings. */
final class LayerNormNetworks {

    private LayerNormNetworks() {
    }

    /** A LayerNorm (or RMSNorm) over {@code width} features in {@code format}; callers adjust the builder. */
    static LayerNormLayer.Builder norm(int width, boolean rms, RNNFormat format) {
        return new LayerNormLayer.Builder(width).rms(rms).dataFormat(format);
    }

    /** [the norms in a row, RnnOutputLayer(softmax, MCXENT)] with the first norm's input type. */
    static MultiLayerConfiguration mlnConf(DataType dataType, IUpdater updater, long seed, LayerNormLayer... norms) {
        NeuralNetConfiguration.ListBuilder list = LayerTestSupport.network(dataType, updater, seed).list();
        for (LayerNormLayer norm : norms) {
            list.layer(norm);
        }
        LayerNormLayer last = norms[norms.length - 1];
        return list.layer(outputLayer(last.width(), last.dataFormat()))
                .setInputType(InputType.recurrent(norms[0].width(), norms[0].dataFormat()))
                .build();
    }

    static MultiLayerNetwork mln(DataType dataType, IUpdater updater, long seed, LayerNormLayer... norms) {
        MultiLayerNetwork net = new MultiLayerNetwork(mlnConf(dataType, updater, seed, norms));
        net.init();
        return net;
    }

    /** in -> "norm" -> "out" (RnnOutputLayer). */
    static ComputationGraphConfiguration graphConf(LayerNormLayer norm, DataType dataType, IUpdater updater,
                                                   long seed) {
        return LayerTestSupport.network(dataType, updater, seed)
                .graphBuilder()
                .addInputs("in")
                .setInputTypes(InputType.recurrent(norm.width(), norm.dataFormat()))
                .addLayer("norm", norm, "in")
                .addLayer("out", outputLayer(norm.width(), norm.dataFormat()), "norm")
                .setOutputs("out")
                .build();
    }

    static ComputationGraph graph(LayerNormLayer norm, DataType dataType, IUpdater updater, long seed) {
        ComputationGraph net = new ComputationGraph(graphConf(norm, dataType, updater, seed));
        net.init();
        return net;
    }

    /**
     * A pre-norm transformer block and a final norm, NCW, NoOp updater:
     * {@code in -> "norm1" -> "attn" (causal) -> "res" = in + attn -> "final" -> "out"}, both norms LayerNorm.
     */
    static ComputationGraph preNormBlock(DataType dataType, long seed, int width) {
        ComputationGraph net = new ComputationGraph(LayerTestSupport.network(dataType, new NoOp(), seed)
                .graphBuilder()
                .addInputs("in")
                .setInputTypes(InputType.recurrent(width, RNNFormat.NCW))
                .addLayer("norm1", new LayerNormLayer.Builder(width).build(), "in")
                .addLayer("attn", LayerTestSupport.attention(width, width, 2).causal(true).build(), "norm1")
                .addVertex("res", new ElementWiseVertex(ElementWiseVertex.Op.Add), "in", "attn")
                .addLayer("final", new LayerNormLayer.Builder(width).build(), "res")
                .addLayer("out", outputLayer(width, RNNFormat.NCW), "final")
                .setOutputs("out")
                .build());
        net.init();
        return net;
    }

    /** The network with only the norm, so that its output is the norm's. */
    static MultiLayerNetwork alone(LayerNormLayer norm, DataType dataType, long seed) {
        MultiLayerNetwork net = new MultiLayerNetwork(LayerTestSupport.network(dataType, new NoOp(), seed).list()
                .layer(norm).build());
        net.init();
        return net;
    }

    private static void randomiseNorms(Random rnd, BiConsumer<String, INDArray> setParam,
                                       Function<String, INDArray> getParam, String... prefixes) {
        for (String prefix : prefixes) {
            INDArray g = getParam.apply(prefix + LayerNormParamInitializer.GAIN);
            setParam.accept(prefix + LayerNormParamInitializer.GAIN, gaussian(rnd, g, 1.0));
            INDArray b = getParam.apply(prefix + LayerNormParamInitializer.BIAS);
            if (b != null) {
                setParam.accept(prefix + LayerNormParamInitializer.BIAS, gaussian(rnd, b, 0.0));
            }
        }
    }

    /**
     * Moves every norm's gain to {@code 1 + 0.5 N(0, 1)} and bias to {@code 0.5 N(0, 1)}, so that tests do not run
     * at the initial point (gain 1, bias 0).
     *
     * @param prefixes the parameter prefixes of the norms, e.g. {@code "0_"}
     */
    static void randomiseNorms(Random rnd, MultiLayerNetwork net, String... prefixes) {
        randomiseNorms(rnd, net::setParam, key -> net.paramTable().get(key), prefixes);
    }

    /** As for a MultiLayerNetwork; prefixes such as {@code "norm1_"}. */
    static void randomiseNorms(Random rnd, ComputationGraph net, String... prefixes) {
        randomiseNorms(rnd, net::setParam, key -> net.paramTable().get(key), prefixes);
    }

    private static INDArray gaussian(Random rnd, INDArray like, double mean) {
        double[] values = new double[(int) like.length()];
        for (int i = 0; i < values.length; i++) {
            values[i] = mean + 0.5 * rnd.nextGaussian();
        }
        return Nd4j.create(values, like.shape(), 'c').castTo(like.dataType());
    }

    /** Softmax over {@link LayerTestSupport#CLASSES} with MCXENT on {@code width} features in {@code format}. */
    static RnnOutputLayer outputLayer(long width, RNNFormat format) {
        return new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                .activation(Activation.SOFTMAX).nIn(width).nOut(LayerTestSupport.CLASSES)
                .dataFormat(format).build();
    }
}
