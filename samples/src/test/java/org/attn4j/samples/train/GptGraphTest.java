package org.attn4j.samples.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;

/** The GPT-like model of {@code attn4j train}. */
class GptGraphTest {

    /** What sizes the default memory bound before ND4J loads: the count of the network DL4J builds. */
    @ParameterizedTest(name = "{6} vocab {0} length {1} width {2} heads {3}/{4} layers {5}")
    @CsvSource({
        "256, 64, 32, 4, 2, 2, FLASH",
        "15, 40, 48, 6, 3, 1, FLASH",
        "256, 64, 32, 4, 2, 2, LINEAR",
        "15, 40, 48, 6, 6, 3, LINEAR",
        "256, 64, 32, 4, 4, 2, STOCK",
        "15, 40, 48, 6, 6, 1, STOCK"})
    void countsTheParametersOfTheNetworkItBuilds(int vocab, int length, int width, int heads, int kvHeads,
                                                  int layers, GptGraph.Attention attention) {
        GptGraph g = new GptGraph(vocab, length, width, heads, kvHeads, layers, attention, DataType.FLOAT, 1e-3, 1);
        assertEquals(g.build().numParams(), g.parameterCount());
    }
}
