package org.attn4j.layers;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.graph.ComputationGraph;

/**
 * Binds the {@link TiedEmbeddingLayer}s of a network to their heads: once after the network is built and
 * initialised, loaded or restored (a layer holds its head as an object, which neither JSON nor a checkpoint
 * carries).
 * <pre>{@code
 * ComputationGraph net = new ComputationGraph(conf);
 * net.init();
 * TiedEmbeddings.bind(net);
 * }</pre>
 */
public final class TiedEmbeddings {

    private TiedEmbeddings() {
    }

    /**
     * Ties every {@link TiedEmbeddingLayer} of {@code net} to the layer its configuration names.
     *
     * @return {@code net}
     * @throws IllegalArgumentException naming a head that is missing or has no weight {@code W [width, vocab]}
     */
    public static ComputationGraph bind(ComputationGraph net) {
        for (Layer l : net.getLayers()) {
            if (l instanceof TiedEmbeddingLayerImpl t) {
                String head = ((TiedEmbeddingLayer) t.conf().getLayer()).getHead();
                var vertex = net.getVertex(head);
                Layer target = vertex == null || !vertex.hasLayer() ? null : vertex.getLayer();
                if (target == null) {
                    throw new IllegalArgumentException("TiedEmbeddingLayer " + t.conf().getLayer().getLayerName()
                            + ": its head " + head + " is not a layer of this network");
                }
                t.bind(target);
            }
        }
        return net;
    }

    /** Whether every {@link TiedEmbeddingLayer} of {@code net} is bound (true when it has none). */
    public static boolean bound(ComputationGraph net) {
        for (Layer l : net.getLayers()) {
            if (l instanceof TiedEmbeddingLayerImpl t && !t.bound()) {
                return false;
            }
        }
        return true;
    }
}
