package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.attn4j.layers.TiedEmbeddings;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;

/**
 * {@link DecoderGraph}'s training step is DL4J's: on small random Llama, Qwen2 (tied embeddings, biases) and Mistral
 * (sliding window) decoders, float64, a batch with unscored positions, the score and the whole gradient vector equal
 * those of DL4J's own {@code computeGradientAndScore} on the same graph, and with activation checkpointing they are
 * the same to the last bit.
 */
class DecoderGraphTest {

    @ParameterizedTest(name = "{0}, window {1}")
    @CsvSource({"llama, 0", "qwen2, 0", "mistral, 5"})
    void theStepIsDl4jsWithAndWithoutActivationCheckpointing(String type, int window) {
        HfConfig c = TokenStepTest.config(type, window);
        HfDecoder model = HfDecoder.random(c, DataType.DOUBLE, 3);
        DataSet d = HfFineTuner.batch(HfFineTunerTest.tokens(c, 2, 24, 5), DataType.DOUBLE);
        INDArray mask = d.getLabelsMaskArray();
        mask.putScalar(0, 5, 0.0);                                     // unscored positions besides the last
        mask.putScalar(1, 17, 0.0);

        ComputationGraph dl4j = TiedEmbeddings.bind(model.graph().clone());     // a plain graph: DL4J's step
        assertTrue(!(dl4j instanceof DecoderGraph));
        double expectedScore = step(dl4j, d);
        INDArray expected = dl4j.getGradientsViewArray().dup();

        DecoderGraph ours = (DecoderGraph) model.graph();
        double score = step(ours, d);
        INDArray gradient = ours.getGradientsViewArray().dup();
        assertEquals(expectedScore, score, 1e-12 * expectedScore);
        double scale = expected.amaxNumber().doubleValue();
        double diff = gradient.sub(expected).amaxNumber().doubleValue();
        assertTrue(diff <= 1e-10 * scale, "largest gradient difference " + diff + " of " + scale);
        assertTrue(scale > 0);

        model.activationCheckpointing(true);
        ours.getGradientsViewArray().assign(Double.NaN);
        assertEquals(score, step(ours, d), 0.0, "checkpointed score");
        assertEquals(gradient, ours.getGradientsViewArray(), "checkpointed gradient, bit for bit");
    }

    private static double step(ComputationGraph g, DataSet d) {
        g.setInputs(d.getFeatures());
        g.setLabels(d.getLabels());
        g.setLayerMaskArrays(null, new INDArray[] {d.getLabelsMaskArray()});
        g.computeGradientAndScore();
        return g.score();
    }
}
