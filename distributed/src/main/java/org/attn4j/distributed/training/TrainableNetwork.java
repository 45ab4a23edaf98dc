package org.attn4j.distributed.training;

import java.util.Collection;

import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.updater.BaseMultiLayerUpdater;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.api.ndarray.INDArray;

/** What the trainer needs of a DL4J network, for a {@link MultiLayerNetwork} or a single-input/output graph. */
interface TrainableNetwork {

    /** The network as DL4J's listeners see it. */
    Model model();

    /** The flattened parameter vector (a view: writing it changes the network). */
    INDArray params();

    /** The flattened gradient vector of the last {@link #computeGradientAndScore}. */
    INDArray gradients();

    /** The network's updater (created if it has none yet). */
    BaseMultiLayerUpdater<?> updater();

    /** Whether DL4J divides gradients by the minibatch size (the configuration's {@code miniBatch}). */
    boolean miniBatch();

    /** Sets this step's input, labels and label mask (null for none). */
    void setData(INDArray features, INDArray labels, INDArray labelMask);

    /** Forward and backward pass on the data set: gradients and the score of this worker's part. */
    void computeGradientAndScore();

    /** The score of the last {@link #computeGradientAndScore}. */
    double score();

    /** Sets the score listeners see. */
    void setScore(double score);

    /** Parameter updates so far. */
    int iteration();

    /** Sets the iteration count. */
    void setIteration(int iteration);

    /** Epochs so far. */
    int epoch();

    /** The network's own listeners. */
    Collection<TrainingListener> listeners();

    /** The configuration as JSON with its training counters zeroed: what identifies the model. */
    String configurationJson();

    /** The adapter of a network. */
    static TrainableNetwork of(Model model) {
        if (model instanceof MultiLayerNetwork net) {
            return new Multi(net);
        }
        if (model instanceof ComputationGraph graph) {
            if (graph.getNumInputArrays() != 1 || graph.getNumOutputArrays() != 1) {
                throw new IllegalArgumentException("DistributedTrainer: a ComputationGraph with "
                        + graph.getNumInputArrays() + " inputs and " + graph.getNumOutputArrays()
                        + " outputs; one of each is supported");
            }
            return new Graph(graph);
        }
        throw new IllegalArgumentException("DistributedTrainer: expected a MultiLayerNetwork or ComputationGraph, "
                + "got " + (model == null ? "null" : model.getClass().getName()));
    }

    /** A {@link MultiLayerNetwork}. */
    record Multi(MultiLayerNetwork net) implements TrainableNetwork {
        @Override
        public Model model() {
            return net;
        }

        @Override
        public INDArray params() {
            return net.params();
        }

        @Override
        public INDArray gradients() {
            return net.getGradientsViewArray();
        }

        @Override
        public BaseMultiLayerUpdater<?> updater() {
            return (BaseMultiLayerUpdater<?>) net.getUpdater(true);
        }

        @Override
        public boolean miniBatch() {
            return net.getLayerWiseConfigurations().getConf(0).isMiniBatch();
        }

        @Override
        public void setData(INDArray features, INDArray labels, INDArray labelMask) {
            net.setInput(features);
            net.setLabels(labels);
            net.setLayerMaskArrays(null, labelMask);
        }

        @Override
        public void computeGradientAndScore() {
            net.computeGradientAndScore();
        }

        @Override
        public double score() {
            return net.score();
        }

        @Override
        public void setScore(double score) {
            net.setScore(score);
        }

        @Override
        public int iteration() {
            return net.getIterationCount();
        }

        @Override
        public void setIteration(int iteration) {
            net.setIterationCount(iteration);
        }

        @Override
        public int epoch() {
            return net.getEpochCount();
        }

        @Override
        public Collection<TrainingListener> listeners() {
            return net.getListeners();
        }

        @Override
        public String configurationJson() {
            org.deeplearning4j.nn.conf.MultiLayerConfiguration c = net.getLayerWiseConfigurations().clone();
            c.setIterationCount(0);
            c.setEpochCount(0);
            return c.toJson();
        }
    }

    /** A {@link ComputationGraph} with one input and one output. */
    record Graph(ComputationGraph graph) implements TrainableNetwork {
        @Override
        public Model model() {
            return graph;
        }

        @Override
        public INDArray params() {
            return graph.params();
        }

        @Override
        public INDArray gradients() {
            return graph.getGradientsViewArray();
        }

        @Override
        public BaseMultiLayerUpdater<?> updater() {
            return graph.getUpdater(true);
        }

        @Override
        public boolean miniBatch() {
            return graph.getConfiguration().getDefaultConfiguration().isMiniBatch();
        }

        @Override
        public void setData(INDArray features, INDArray labels, INDArray labelMask) {
            graph.setInputs(features);
            graph.setLabels(labels);
            graph.setLayerMaskArrays(null, labelMask == null ? null : new INDArray[] {labelMask});
        }

        @Override
        public void computeGradientAndScore() {
            graph.computeGradientAndScore();
        }

        @Override
        public double score() {
            return graph.score();
        }

        @Override
        public void setScore(double score) {
            graph.setScore(score);
        }

        @Override
        public int iteration() {
            return graph.getIterationCount();
        }

        @Override
        public void setIteration(int iteration) {
            graph.getConfiguration().setIterationCount(iteration);
        }

        @Override
        public int epoch() {
            return graph.getEpochCount();
        }

        @Override
        public Collection<TrainingListener> listeners() {
            return graph.getListeners();
        }

        @Override
        public String configurationJson() {
            org.deeplearning4j.nn.conf.ComputationGraphConfiguration c = graph.getConfiguration().clone();
            c.setIterationCount(0);
            c.setEpochCount(0);
            return c.toJson();
        }
    }
}
