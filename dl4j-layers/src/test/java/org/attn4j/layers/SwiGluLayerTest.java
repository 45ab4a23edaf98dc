package org.attn4j.layers;

import static org.attn4j.layers.LayerTestSupport.SEED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.util.Random;

import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * {@link SwiGluLayer}: the output by the definition {@code down(silu(gate x) * up x)} in float64, gradient checks in
 * MultiLayerNetwork (both layouts, with and without biases, masked) and ComputationGraph, JSON and ModelSerializer
 * round trips, and one-line refusals.
 */
class SwiGluLayerTest {

    private static final int N_IN = 4;
    private static final int HIDDEN = 6;
    private static final int MB = 3;
    private static final int N = 5;

    @BeforeEach
    void doublePrecision() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
    }

    private static SwiGluLayer layer(boolean bias, RNNFormat format) {
        return new SwiGluLayer.Builder().nIn(N_IN).hiddenSize(HIDDEN).bias(bias).dataFormat(format).build();
    }

    private static MultiLayerNetwork mln(SwiGluLayer layer, long seed, org.nd4j.linalg.learning.config.IUpdater u) {
        MultiLayerConfiguration conf = LayerTestSupport.network(DataType.DOUBLE, u, seed).list()
                .layer(layer)
                .layer(LayerNormNetworks.outputLayer(layer.getNOut(), layer.dataFormat()))
                .setInputType(InputType.recurrent(N_IN, layer.dataFormat()))
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        return net;
    }

    @ParameterizedTest(name = "bias={0}")
    @CsvSource({"false", "true"})
    void matchesTheDefinitionInFloat64(boolean bias) {
        MultiLayerNetwork net = mln(layer(bias, RNNFormat.NCW), SEED, new NoOp());
        INDArray x = LayerTestSupport.features(new Random(SEED), DataType.DOUBLE, RNNFormat.NCW, MB, N_IN, N);
        INDArray actual = net.feedForwardToLayer(0, x).get(1);
        double[][] wg = NaiveMath.matrix(net.getParam("0_Wg"));
        double[][] wu = NaiveMath.matrix(net.getParam("0_Wu"));
        double[][] wd = NaiveMath.matrix(net.getParam("0_Wd"));
        double[] bg = bias ? NaiveMath.vector(net.getParam("0_bg")) : new double[HIDDEN];
        double[] bu = bias ? NaiveMath.vector(net.getParam("0_bu")) : new double[HIDDEN];
        double[] bd = bias ? NaiveMath.vector(net.getParam("0_bd")) : new double[N_IN];
        double[][][] expected = new double[MB][][];
        for (int b = 0; b < MB; b++) {
            double[][] gate = NaiveMath.affine(NaiveMath.steps(x, RNNFormat.NCW, b), wg, bg);
            double[][] up = NaiveMath.affine(NaiveMath.steps(x, RNNFormat.NCW, b), wu, bu);
            double[][] h = new double[N][HIDDEN];
            for (int t = 0; t < N; t++) {
                for (int j = 0; j < HIDDEN; j++) {
                    h[t][j] = gate[t][j] / (1 + Math.exp(-gate[t][j])) * up[t][j];
                }
            }
            expected[b] = NaiveMath.affine(h, wd, bd);
        }
        NaiveMath.assertMatches(expected, actual, RNNFormat.NCW, 1e-12, "SwiGLU bias=" + bias);
    }

    @ParameterizedTest(name = "bias={0} {1} masked={2}")
    @CsvSource({"false, NCW, false", "true, NWC, true", "false, NWC, true", "true, NCW, false"})
    void passesGradientCheckInMultiLayerNetwork(boolean bias, RNNFormat format, boolean masked) {
        long seed = SEED + 3 + format.ordinal() + (bias ? 10 : 0);
        MultiLayerNetwork net = mln(layer(bias, format), seed, new NoOp());
        assertTrue(GradientChecks.passes(net, new Random(seed), format, MB, N_IN, N, masked), "gradient check");
    }

    @Test
    void passesGradientCheckInComputationGraphWithAnotherOutputWidth() {
        SwiGluLayer layer = new SwiGluLayer.Builder().nIn(N_IN).hiddenSize(HIDDEN).nOut(3).bias(true).build();
        ComputationGraphConfiguration conf = LayerTestSupport.network(DataType.DOUBLE, new NoOp(), SEED + 5)
                .graphBuilder().addInputs("in").setInputTypes(InputType.recurrent(N_IN))
                .addLayer("mlp", layer, "in")
                .addLayer("out", LayerNormNetworks.outputLayer(3, RNNFormat.NCW), "mlp")
                .setOutputs("out").build();
        ComputationGraph graph = new ComputationGraph(conf);
        graph.init();
        assertTrue(GradientChecks.passes(graph, new Random(SEED + 5), RNNFormat.NCW, MB, N_IN, N, true),
                "gradient check in a ComputationGraph");
        assertEquals(conf, ComputationGraphConfiguration.fromJson(conf.toJson()));
    }

    @Test
    void survivesJsonAndModelSerializerWithIdenticalOutputs() throws Exception {
        MultiLayerNetwork net = mln(layer(true, RNNFormat.NWC), SEED + 7, new Adam(1e-3));
        MultiLayerConfiguration restored = MultiLayerConfiguration.fromJson(net.getLayerWiseConfigurations()
                .toJson());
        assertEquals(net.getLayerWiseConfigurations(), restored);
        INDArray x = LayerTestSupport.features(new Random(SEED + 7), DataType.DOUBLE, RNNFormat.NWC, MB, N_IN, N);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        ModelSerializer.writeModel(net, bytes, true);
        MultiLayerNetwork back = ModelSerializer.restoreMultiLayerNetwork(new ByteArrayInputStream(bytes
                .toByteArray()), true);
        assertEquals(net.output(x), back.output(x));
        assertEquals(2L * N_IN * HIDDEN + HIDDEN * N_IN, mln(layer(false, RNNFormat.NCW), 1, new NoOp())
                .getLayer(0).numParams(), "Wg, Wu, Wd and no biases");
    }

    @Test
    void refusesSettingsThatCannotWorkInOneLine() {
        IllegalArgumentException hidden = assertThrows(IllegalArgumentException.class,
                () -> new SwiGluLayer.Builder().nIn(4).build());
        assertTrue(hidden.getMessage().contains("hiddenSize must be > 0, got 0"), hidden.getMessage());
        IllegalArgumentException activation = assertThrows(IllegalArgumentException.class,
                () -> new SwiGluLayer.Builder().nIn(4).hiddenSize(8)
                        .activation(org.nd4j.linalg.activations.Activation.RELU).build());
        assertTrue(activation.getMessage().contains("activation must be identity"), activation.getMessage());
    }
}
