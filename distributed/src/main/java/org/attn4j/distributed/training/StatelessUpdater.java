package org.attn4j.distributed.training;

import org.deeplearning4j.nn.api.Trainable;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.updater.MultiLayerUpdater;
import org.deeplearning4j.nn.updater.graph.ComputationGraphUpdater;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The DL4J updater a network gets while {@link DistributedTrainer} trains it: no blocks and no state, so that
 * nothing DL4J does on the side (a {@code CheckpointListener} saving the model asks the network for its updater)
 * allocates optimizer state for the whole parameter vector. The trainer's {@link ShardedUpdater} holds the state
 * of this worker's slice. Models saved through DL4J therefore carry no updater state; sharded checkpoints do.
 * A DL4J {@code fit} on the network fails with a message instead of silently not updating.
 */
final class StatelessUpdater {

    private static final String REFUSED = "this network is trained by attn4j's DistributedTrainer, which keeps its "
            + "optimizer state sharded over the workers; DL4J's own fit cannot update it (restore the model from a "
            + "saved file to train it with DL4J)";

    private StatelessUpdater() {
    }

    /** For a {@link MultiLayerNetwork}. */
    static final class OfMultiLayer extends MultiLayerUpdater {
        private static final long serialVersionUID = 1L;

        OfMultiLayer(MultiLayerNetwork net) {
            super(net);
        }

        @Override
        protected Trainable[] getOrderedLayers() {
            return new Trainable[0];
        }

        @Override
        public INDArray getFlattenedGradientsView() {
            return null;
        }

        @Override
        public void update(Trainable layer, Gradient gradient, int iteration, int epoch, int batchSize,
                           LayerWorkspaceMgr workspaceMgr) {
            throw new IllegalStateException(REFUSED);
        }

        @Override
        public synchronized void update(Gradient gradient, int iteration, int epoch, int batchSize,
                                        LayerWorkspaceMgr workspaceMgr) {
            throw new IllegalStateException(REFUSED);
        }
    }

    /** For a {@link ComputationGraph}. */
    static final class OfGraph extends ComputationGraphUpdater {
        private static final long serialVersionUID = 1L;

        OfGraph(ComputationGraph graph) {
            super(graph);
        }

        @Override
        protected Trainable[] getOrderedLayers() {
            return new Trainable[0];
        }

        @Override
        public INDArray getFlattenedGradientsView() {
            return null;
        }

        @Override
        public void update(Trainable layer, Gradient gradient, int iteration, int epoch, int batchSize,
                           LayerWorkspaceMgr workspaceMgr) {
            throw new IllegalStateException(REFUSED);
        }

        @Override
        public synchronized void update(Gradient gradient, int iteration, int epoch, int batchSize,
                                        LayerWorkspaceMgr workspaceMgr) {
            throw new IllegalStateException(REFUSED);
        }
    }
}
