package org.attn4j.layers;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.common.primitives.Pair;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.learning.config.IUpdater;
import org.nd4j.linalg.learning.config.NoOp;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/** Networks around a {@link PositionalEmbeddingLayer} for its tests, and a layer-level training pass. */
final class PositionalNetworks {

    private PositionalNetworks() {
    }

    /** A positional embedding layer of the given width and maxLength; callers adjust the builder. */
    static PositionalEmbeddingLayer.Builder positional(int width, int maxLength) {
        return new PositionalEmbeddingLayer.Builder().width(width).maxLength(maxLength);
    }

    /** [layer, RnnOutputLayer(softmax, MCXENT) with {@link LayerTestSupport#CLASSES} classes], with input type. */
    static MultiLayerConfiguration mlnConf(PositionalEmbeddingLayer layer, DataType dataType, IUpdater updater,
                                           long seed) {
        return LayerTestSupport.network(dataType, updater, seed).list()
                .layer(layer)
                .layer(outputLayer(layer))
                .setInputType(InputType.recurrent(layer.width(), layer.dataFormat()))
                .build();
    }

    static MultiLayerNetwork mln(PositionalEmbeddingLayer layer, DataType dataType, IUpdater updater, long seed) {
        MultiLayerNetwork net = new MultiLayerNetwork(mlnConf(layer, dataType, updater, seed));
        net.init();
        return net;
    }

    /** in -> "pos" (the layer) -> "out" (RnnOutputLayer). */
    static ComputationGraphConfiguration graphConf(PositionalEmbeddingLayer layer, DataType dataType,
                                                   IUpdater updater, long seed) {
        return LayerTestSupport.network(dataType, updater, seed).graphBuilder()
                .addInputs("in")
                .setInputTypes(InputType.recurrent(layer.width(), layer.dataFormat()))
                .addLayer("pos", layer, "in")
                .addLayer("out", outputLayer(layer), "pos")
                .setOutputs("out")
                .build();
    }

    static ComputationGraph graph(PositionalEmbeddingLayer layer, DataType dataType, IUpdater updater, long seed) {
        ComputationGraph net = new ComputationGraph(graphConf(layer, dataType, updater, seed));
        net.init();
        return net;
    }

    /** The layer alone in a network (NoOp updater), with its gradient view allocated. */
    static MultiLayerNetwork alone(PositionalEmbeddingLayer layer, DataType dataType, long seed) {
        MultiLayerNetwork net = new MultiLayerNetwork(LayerTestSupport.network(dataType, new NoOp(), seed).list()
                .layer(layer).build());
        net.init();
        net.initGradientsView();
        return net;
    }

    /** Softmax over {@link LayerTestSupport#CLASSES} classes with MCXENT on top of {@code below}, in its format. */
    static RnnOutputLayer outputLayer(PositionalEmbeddingLayer below) {
        return new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                .activation(Activation.SOFTMAX).nIn(below.width()).nOut(LayerTestSupport.CLASSES)
                .dataFormat(below.dataFormat()).build();
    }

    /** The output and gradients of one training forward and backward of a network's only layer. */
    record Pass(INDArray output, INDArray inputGradient, INDArray tableGradient) {
        /** Runs layer 0 of {@code net} forward (training) on {@code x} and {@code mask}, then back from {@code eps}. */
        static Pass of(MultiLayerNetwork net, INDArray x, INDArray mask, INDArray eps) {
            Layer layer = net.getLayer(0);
            layer.setMaskArray(mask);
            INDArray out = layer.activate(x, true, LayerWorkspaceMgr.noWorkspaces()).dup();
            Pair<Gradient, INDArray> g = layer.backpropGradient(eps, LayerWorkspaceMgr.noWorkspaces());
            return new Pass(out, g.getSecond().dup(),
                    g.getFirst().getGradientFor(PositionalEmbeddingParamInitializer.P).dup());
        }
    }
}
