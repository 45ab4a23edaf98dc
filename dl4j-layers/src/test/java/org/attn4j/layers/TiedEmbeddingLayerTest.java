package org.attn4j.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.util.Random;

import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.gradientcheck.GradientCheckUtil;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.weights.WeightInit;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.NoOp;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * A {@link TiedEmbeddingLayer} and its head are one parameter: the graph holds the head's {@code W} only; the
 * forward pass equals a graph with its own embedding {@code E = W^T}; the gradient of {@code W} is the sum of that
 * graph's head and embedding gradients (ids repeat, so columns collect several steps); DL4J's numerical gradient
 * check passes; the configuration survives JSON, the network ModelSerializer (bound again), and an unbound layer
 * or an id outside the vocabulary fails in one line.
 */
class TiedEmbeddingLayerTest {

    private static final int WIDTH = 6;
    private static final int VOCAB = 9;

    private static ComputationGraphConfiguration graph(Layer embed) {
        return new NeuralNetConfiguration.Builder().seed(5).dataType(DataType.DOUBLE).updater(new NoOp())
                .weightInit(WeightInit.NORMAL).graphBuilder()
                .addInputs("in")
                .addLayer("embed", embed, "in")
                .addLayer("norm", new LayerNormLayer.Builder(WIDTH).rms(true).build(), "embed")
                .addLayer("head", new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(WIDTH).nOut(VOCAB).dataFormat(RNNFormat.NCW).build(),
                        "norm")
                .setOutputs("head").build();
    }

    private static ComputationGraph tied() {
        ComputationGraph g = new ComputationGraph(graph(new TiedEmbeddingLayer.Builder().width(WIDTH).head("head")
                .build()));
        g.init();
        return TiedEmbeddings.bind(g);
    }

    /** The same network with an embedding of its own, set to the tied one's W^T. */
    private static ComputationGraph untied(ComputationGraph tied) {
        ComputationGraph g = new ComputationGraph(graph(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(WIDTH)
                .hasBias(false).outputDataFormat(RNNFormat.NCW).build()));
        g.init();
        for (var e : tied.paramTable().entrySet()) {
            g.getParam(e.getKey()).assign(e.getValue());
        }
        g.getParam("embed_W").assign(tied.getParam("head_W").transpose());
        return g;
    }

    private static INDArray ids(long seed) {
        Random rnd = new Random(seed);
        double[] v = new double[2 * 7];
        for (int i = 0; i < v.length; i++) {
            v[i] = rnd.nextInt(4);                                  // few ids: they repeat
        }
        return Nd4j.createFromArray(v).reshape(2, 1, 7);
    }

    private static INDArray labels(long seed) {
        Random rnd = new Random(seed);
        INDArray y = Nd4j.zeros(DataType.DOUBLE, 2, VOCAB, 7);
        for (int b = 0; b < 2; b++) {
            for (int t = 0; t < 7; t++) {
                y.putScalar(b, rnd.nextInt(VOCAB), t, 1.0);
            }
        }
        return y;
    }

    @Test
    void oneParameterWithTheForwardAndTheGradientOfTwoEqualOnes() {
        ComputationGraph tied = tied();
        ComputationGraph untied = untied(tied);
        assertEquals(untied.numParams() - (long) VOCAB * WIDTH, tied.numParams(), "the embedding is not stored");
        INDArray x = ids(1);
        INDArray y = labels(2);
        assertEquals(0, untied.outputSingle(x).sub(tied.outputSingle(x)).amaxNumber().doubleValue(), 1e-14);

        tied.setInputs(x);
        tied.setLabels(y);
        tied.computeGradientAndScore();
        untied.setInputs(x);
        untied.setLabels(y);
        untied.computeGradientAndScore();
        assertEquals(untied.score(), tied.score(), 1e-14);
        INDArray expected = untied.gradient().getGradientFor("head_W")
                .add(untied.gradient().getGradientFor("embed_W").transpose());
        INDArray actual = tied.gradient().getGradientFor("head_W");
        assertTrue(untied.gradient().getGradientFor("embed_W").amaxNumber().doubleValue() > 1e-3);
        assertEquals(0, actual.sub(expected).amaxNumber().doubleValue(), 1e-13, "the tied W's gradient");
    }

    @Test
    void passesTheNumericalGradientCheck() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        ComputationGraph tied = tied();
        assertTrue(GradientCheckUtil.checkGradients(new GradientCheckUtil.GraphConfig().net(tied)
                .inputs(new INDArray[] {ids(3)}).labels(new INDArray[] {labels(4)})
                .epsilon(GradientChecks.EPS).maxRelError(GradientChecks.MAX_REL_ERROR)
                .minAbsoluteError(GradientChecks.MIN_ABS_ERROR)));
    }

    @Test
    void survivesJsonAndModelSerializerOnceBoundAgain(@TempDir File dir) throws Exception {
        ComputationGraph tied = tied();
        assertEquals(tied.getConfiguration(), ComputationGraphConfiguration.fromJson(tied.getConfiguration().toJson()));
        File file = new File(dir, "tied.zip");
        ModelSerializer.writeModel(tied, file, true);
        ComputationGraph restored = ModelSerializer.restoreComputationGraph(file, true);
        assertTrue(!TiedEmbeddings.bound(restored));
        Exception e = assertThrows(DL4JInvalidInputException.class, () -> restored.outputSingle(ids(5)));
        assertTrue(e.getMessage().contains("TiedEmbeddings.bind"), e.getMessage());
        TiedEmbeddings.bind(restored);
        assertEquals(0, tied.outputSingle(ids(5)).sub(restored.outputSingle(ids(5))).amaxNumber().doubleValue());
    }

    @Test
    void anIdOutsideTheVocabularyOrAHeadWithoutWeightsIsNamed() {
        ComputationGraph tied = tied();
        INDArray bad = ids(6);
        bad.putScalar(1, 0, 3, VOCAB);
        Exception e = assertThrows(DL4JInvalidInputException.class, () -> tied.outputSingle(bad));
        assertTrue(e.getMessage().contains("[0, " + VOCAB + ")") && e.getMessage().contains("got 9.0"),
                e.getMessage());
        ComputationGraph wrong = new ComputationGraph(graph(new TiedEmbeddingLayer.Builder().width(WIDTH)
                .head("norm").build()));
        wrong.init();
        Exception w = assertThrows(IllegalArgumentException.class, () -> TiedEmbeddings.bind(wrong));
        assertTrue(w.getMessage().contains("norm"), w.getMessage());
    }
}
