package org.attn4j.distributed.training;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.api.Trainable;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.graph.vertex.GraphVertex;
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

    /**
     * The layers (graph vertices) that hold parameters, in the order of the flattened parameter vector (input to
     * output; topological for a graph).
     */
    List<Trainable> orderedLayers();

    /** The network's DL4J updater if it has one already (restored with a model, or made by {@code fit}), else null. */
    BaseMultiLayerUpdater<?> existingUpdater();

    /**
     * Replaces the network's DL4J updater with one that holds no state (so nothing, not even a listener saving the
     * model, makes DL4J allocate optimizer state for the whole vector) and refuses to update.
     */
    void detachUpdater();

    /** Sets the epoch count. */
    void setEpoch(int epoch);

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

    /** {@code "MultiLayerNetwork"} or {@code "ComputationGraph"}, as checkpoint manifests name the kind. */
    default String kind() {
        return model() instanceof ComputationGraph ? "ComputationGraph" : "MultiLayerNetwork";
    }

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
            if (net.getGradientsViewArray() == null) {
                net.initGradientsView();
            }
            return net.getGradientsViewArray();
        }

        @Override
        public List<Trainable> orderedLayers() {
            List<Trainable> out = new ArrayList<>();
            for (Layer l : net.getLayers()) {
                if (l.numParams() > 0) {
                    out.add(l);
                }
            }
            return out;
        }

        @Override
        public BaseMultiLayerUpdater<?> existingUpdater() {
            return (BaseMultiLayerUpdater<?>) net.getUpdater(false);
        }

        @Override
        public void detachUpdater() {
            net.setUpdater(new StatelessUpdater.OfMultiLayer(net));
        }

        @Override
        public void setEpoch(int epoch) {
            net.setEpochCount(epoch);
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
            if (graph.getGradientsViewArray() == null) {
                graph.initGradientsView();
            }
            return graph.getGradientsViewArray();
        }

        @Override
        public List<Trainable> orderedLayers() {
            List<Trainable> out = new ArrayList<>();
            GraphVertex[] vertices = graph.getVertices();
            for (int i : graph.topologicalSortOrder()) {
                if (vertices[i].numParams() > 0) {
                    out.add(vertices[i]);
                }
            }
            return out;
        }

        @Override
        public BaseMultiLayerUpdater<?> existingUpdater() {
            return graph.getUpdater(false);
        }

        @Override
        public void detachUpdater() {
            graph.setUpdater(new StatelessUpdater.OfGraph(graph));
        }

        @Override
        public void setEpoch(int epoch) {
            graph.getConfiguration().setEpochCount(epoch);
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
