package org.attn4j.layers;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;

/**
 * The key/value caches that {@link FlashAttentionLayer}s keep during {@code rnnTimeStep} decoding, for a whole
 * network: make room ahead for a known number of steps, and read the bytes they hold.
 *
 * <pre>{@code
 * KeyValueCaches.reserve(net, prompt.length + maxNewTokens);   // one allocation per layer, no more than needed
 * net.rnnTimeStep(prompt);                                     // then one token per call
 * long bytes = KeyValueCaches.bytes(net);
 * }</pre>
 */
public final class KeyValueCaches {

    private KeyValueCaches() {
    }

    /**
     * Bytes per cached step in one flash attention layer, per sequence of the batch: its key and value,
     * {@code 2 x Hkv x D} elements of the network's type ({@code width} bytes each), and its position (4 bytes).
     */
    public static long bytesPerStep(FlashAttentionLayer layer, int width) {
        return 2L * layer.getNKvHeads() * (layer.getNOut() / layer.getNHeads()) * width + Integer.BYTES;
    }

    /** {@link FlashAttentionLayerImpl#reserveCache} on every flash attention layer of {@code net}. */
    public static void reserve(MultiLayerNetwork net, int steps) {
        reserve(net.getLayers(), steps);
    }

    /** {@link FlashAttentionLayerImpl#reserveCache} on every flash attention layer of {@code net}. */
    public static void reserve(ComputationGraph net, int steps) {
        reserve(net.getLayers(), steps);
    }

    /** The bytes every flash attention layer's cache of {@code net} holds now, room to grow included. */
    public static long bytes(MultiLayerNetwork net) {
        return bytes(net.getLayers());
    }

    /** The bytes every flash attention layer's cache of {@code net} holds now, room to grow included. */
    public static long bytes(ComputationGraph net) {
        return bytes(net.getLayers());
    }

    private static void reserve(Layer[] layers, int steps) {
        for (Layer l : layers) {
            if (l instanceof FlashAttentionLayerImpl f) {
                f.reserveCache(steps);
            }
        }
    }

    private static long bytes(Layer[] layers) {
        long sum = 0;
        for (Layer l : layers) {
            if (l instanceof FlashAttentionLayerImpl f) {
                sum += f.cacheBytes();
            }
        }
        return sum;
    }
}
