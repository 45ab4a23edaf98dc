package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.learning.config.Adam;

/**
 * {@link LayerSerializationContract} for the attention layers, whose shared settings (heads, head size, causal)
 * are compared too, and whose JSON saved before those settings moved into {@link AttentionLayerBase} still reads
 * and is what the layer writes now. A concrete test class also supplies the saved JSON.
 *
 * @param <L> the layer under test
 */
abstract class AttentionLayerSerializationContract<L extends AttentionLayerBase> extends LayerSerializationContract<L> {

    AttentionLayerSerializationContract(Class<L> layerClass) {
        super(layerClass, "attn");
    }

    /** The resource, next to this class, holding {@link #savedConfiguration()} as JSON captured at 3117bcd. */
    abstract String savedJsonResource();

    /** The configuration the saved JSON was written from, built again. */
    abstract MultiLayerConfiguration savedConfiguration();

    @Override
    MultiLayerConfiguration mlnConf(L layer) {
        return LayerTestSupport.mlnConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);
    }

    @Override
    ComputationGraphConfiguration graphConf(L layer) {
        return LayerTestSupport.graphConf(layer, DataType.FLOAT, new Adam(1e-3), SEED);
    }

    @Override
    void assertSameKindSettings(L expected, L actual, String name) {
        assertEquals(expected.getNHeads(), actual.getNHeads(), name + ": nHeads");
        assertEquals(expected.getNKvHeads(), actual.getNKvHeads(), name + ": nKvHeads");
        assertEquals(expected.getHeadSize(), actual.getHeadSize(), name + ": headSize");
        assertEquals(expected.isCausal(), actual.isCausal(), name + ": causal");
    }

    /**
     * The JSON captured before {@link AttentionLayerBase} existed reads back, and is what the layer writes now but
     * for the settings added since, at their defaults (biases on, no RoPE).
     */
    @Test
    void readsAndWritesJsonSavedBeforeTheSharedBaseClass() throws IOException {
        String saved = savedJson();
        MultiLayerConfiguration expected = savedConfiguration();

        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(saved);

        assertEquals(expected, restored);
        for (int i = 0; i < expected.getConfs().size(); i++) {
            assertSameSettings(layer(expected, i), layer(restored, i), "layer " + i);
        }
        assertEquals(saved, expected.toJson().replaceAll("(?m)^\\s*\"(qkvBias|outputBias)\" : true,\\R", "")
                .replaceAll("(?m)^\\s*\"rope\" : null,\\R", "")
                .replaceAll("(?m)^\\s*\"ropeRestartsPerDocument\" : false,\\R", ""));
    }

    private String savedJson() throws IOException {
        try (InputStream in = AttentionLayerSerializationContract.class.getResourceAsStream(savedJsonResource())) {
            assertNotNull(in, "resource " + savedJsonResource());
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }
}
