package org.attn4j.layers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.attn4j.ops.samediff.SDAttention;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.inputs.InputType;
import org.deeplearning4j.nn.conf.layers.Layer;
import org.deeplearning4j.nn.gradient.Gradient;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.listeners.impl.ScoreListener;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.samediff.TrainingConfig;
import org.nd4j.common.primitives.Pair;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.learning.config.NoOp;

/**
 * The SameDiff functions inside a model: the same outputs and gradients as the attn4j DL4J layers on the same
 * weights (float64), training with {@code sd.fit}, and save/load.
 */
class SameDiffLayerParityTest {

    private static final long B = 2;
    private static final long N = 7;
    private static final long N_IN = 5;

    private static MultiLayerNetwork single(Layer attention) {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().seed(LayerTestSupport.SEED)
                .dataType(DataType.DOUBLE).updater(new NoOp()).list().layer(attention)
                .setInputType(InputType.recurrent(N_IN)).build());
        net.init();
        return net;
    }

    private static Map<String, INDArray> params(MultiLayerNetwork net) {
        return new LinkedHashMap<>(net.getLayer(0).paramTable());
    }

    /** DL4J's output and gradients for loss {@code sum(out * eps)}: output, dL/dx and dL/dparam by key. */
    private static Map<String, INDArray> dl4j(MultiLayerNetwork net, INDArray x, INDArray mask, INDArray eps) {
        Map<String, INDArray> r = new HashMap<>();
        net.setLayerMaskArrays(mask, null);
        r.put("out", net.output(x, false, mask, null));
        net.setInput(x);
        net.setLayerMaskArrays(mask, null);
        net.feedForward(true, false);
        Pair<Gradient, INDArray> p = net.backpropGradient(eps, LayerWorkspaceMgr.noWorkspaces());
        r.put("x", p.getSecond());
        p.getFirst().gradientForVariable().forEach((k, g) -> r.put(k.substring(k.indexOf('_') + 1), g.dup()));
        return r;
    }

    private static void assertClose(Map<String, INDArray> expected, Map<String, INDArray> actual, String what) {
        for (String key : expected.keySet()) {
            INDArray e = expected.get(key);
            INDArray a = actual.get(key);
            double diff = a.reshape(e.shape()).sub(e).amaxNumber().doubleValue();
            double scale = Math.max(1e-12, e.amaxNumber().doubleValue());
            assertTrue(diff / scale < 1e-10, what + ": " + key + " differs from the DL4J layer by " + diff
                    + " (max |value| " + scale + ")");
        }
    }

    private static Map<String, INDArray> sameDiff(SameDiff sd, SDVariable out, INDArray x, INDArray mask,
                                                  INDArray eps, Map<String, SDVariable> p) {
        out.mul(sd.constant(eps)).sum().rename("loss").markAsLoss();
        Map<String, INDArray> ph = new HashMap<>();
        ph.put("x", x);
        if (mask != null) {
            ph.put("mask", mask);
        }
        Map<String, INDArray> r = new HashMap<>();
        r.put("out", sd.output(ph, out.name()).get(out.name()));
        List<String> wrt = new java.util.ArrayList<>();
        wrt.add("x");
        p.values().forEach(v -> wrt.add(v.name()));
        Map<String, INDArray> g = sd.calculateGradients(ph, wrt.toArray(new String[0]));
        r.put("x", g.get("x"));
        p.forEach((key, v) -> r.put(key, g.get(v.name())));
        return r;
    }

    private static SameDiff graph() {
        SameDiff sd = SameDiff.create();
        return sd;
    }

    private void flashCase(String what, FlashAttentionLayer conf, boolean masked) {
        MultiLayerNetwork net = single(conf);
        Nd4j.getRandom().setSeed(7);
        INDArray x = Nd4j.randn(DataType.DOUBLE, B, N_IN, N);
        INDArray eps = Nd4j.randn(DataType.DOUBLE, B, conf.getNOut(), N);
        INDArray mask = null;
        if (masked) {
            mask = Nd4j.ones(DataType.DOUBLE, B, N);
            mask.get(org.nd4j.linalg.indexing.NDArrayIndex.point(1),
                    org.nd4j.linalg.indexing.NDArrayIndex.interval(N - 2, N)).assign(0);
        }
        Map<String, INDArray> expected = dl4j(net, x, mask, eps);

        SameDiff sd = graph();
        // x is a variable here so that SameDiff reports dL/dx; its value is the same input
        SDVariable in = sd.var("x", x.dup());
        SDVariable m = masked ? sd.placeHolder("mask", DataType.DOUBLE, B, N) : null;
        Map<String, SDVariable> p = SameDiffBlocks.variables(sd, "attn_", params(net));
        SDVariable out = SameDiffBlocks.flash(sd, in, m, conf, B, N, p);
        assertClose(expected, sameDiff(sd, out, x, mask, eps, p), what);
    }

    @Test
    void flashFunctionMatchesFlashAttentionLayerCausalGqa() {
        flashCase("causal GQA", new FlashAttentionLayer.Builder().nIn(N_IN).nOut(8).nHeads(4).nKvHeads(2).causal(true)
                .build(), false);
    }

    @Test
    void flashFunctionMatchesFlashAttentionLayerWithMaskAndWindow() {
        flashCase("masked full", new FlashAttentionLayer.Builder().nIn(N_IN).nOut(6).nHeads(2).build(), true);
        flashCase("masked causal window 3", new FlashAttentionLayer.Builder().nIn(N_IN).nOut(6).nHeads(2).nKvHeads(1)
                .causal(true).slidingWindow(3).build(), true);
    }

    @Test
    void linearFunctionMatchesLinearAttentionLayerWithLearnedDecay() {
        LinearAttentionLayer conf = new LinearAttentionLayer.Builder().nIn(N_IN).nOut(8).nHeads(2).nKvHeads(1)
                .decay(0.8, 0.95).learnDecay(true).build();
        MultiLayerNetwork net = single(conf);
        Nd4j.getRandom().setSeed(8);
        INDArray x = Nd4j.randn(DataType.DOUBLE, B, N_IN, N);
        INDArray eps = Nd4j.randn(DataType.DOUBLE, B, conf.getNOut(), N);
        Map<String, INDArray> expected = dl4j(net, x, null, eps);

        SameDiff sd = graph();
        SDVariable in = sd.var("x", x.dup());
        Map<String, SDVariable> p = SameDiffBlocks.variables(sd, "lin_", params(net));
        SDVariable out = SameDiffBlocks.linear(sd, in, conf, B, N, p);
        assertClose(expected, sameDiff(sd, out, x, null, eps, p), "linear learned decay");
    }

    /**
     * A two-block SameDiff model (flash attention, then linear attention, then a per-step softmax over 4 classes)
     * learns to output, at each step, the class seen at the previous step, a task only attention can solve.
     */
    @Test
    void sameDiffModelTrainsWithFitAndSurvivesSaveLoad(@TempDir Path dir) throws Exception {
        int classes = 4;
        long n = 12;
        long b = 8;
        SameDiff sd = SameDiff.create();
        SDVariable x = sd.placeHolder("x", DataType.FLOAT, b, classes, n);
        SDVariable labels = sd.placeHolder("labels", DataType.FLOAT, b, n, classes);
        FlashAttentionLayer flash = new FlashAttentionLayer.Builder().nIn(classes).nOut(16).nHeads(2).causal(true)
                .build();
        LinearAttentionLayer lin = new LinearAttentionLayer.Builder().nIn(16).nOut(16).nHeads(2).decay(0.9)
                .learnDecay(true).build();
        MultiLayerNetwork init = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().seed(3)
                .dataType(DataType.FLOAT).list().layer(flash).layer(lin).setInputType(InputType.recurrent(classes))
                .build());
        init.init();
        SDVariable h = SameDiffBlocks.flash(sd, x, null, flash, b, n,
                SameDiffBlocks.variables(sd, "a_", init.getLayer(0).paramTable()));
        h = SameDiffBlocks.linear(sd, sd.nn.gelu(h), lin, b, n,
                SameDiffBlocks.variables(sd, "l_", init.getLayer(1).paramTable()));
        SDVariable w = sd.var("w", Nd4j.randn(DataType.FLOAT, 16, classes).muli(0.25));
        SDVariable logits = SameDiffBlocks.rows(h, 16).mmul(w).reshape(b, n, classes).rename("logits");
        sd.loss.softmaxCrossEntropy("loss", labels, logits, null);
        sd.setTrainingConfig(TrainingConfig.builder().updater(new Adam(1e-2)).dataSetFeatureMapping("x")
                .dataSetLabelMapping("labels").build());

        java.util.Random random = new java.util.Random(11);
        int[][] tokens = new int[(int) b][(int) n];
        for (int[] row : tokens) {
            for (int t = 0; t < row.length; t++) {
                row[t] = random.nextInt(classes);
            }
        }
        INDArray features = Nd4j.zeros(DataType.FLOAT, b, classes, n);
        INDArray target = Nd4j.zeros(DataType.FLOAT, b, n, classes);
        for (int i = 0; i < b; i++) {
            for (int t = 0; t < n; t++) {
                features.putScalar(new long[] {i, tokens[i][t], t}, 1f);
                target.putScalar(new long[] {i, t, tokens[i][Math.max(0, t - 1)]}, 1f);
            }
        }
        DataSet data = new DataSet(features, target);
        double first = loss(sd, data);
        for (int epoch = 0; epoch < 150; epoch++) {
            sd.fit(data);
        }
        double last = loss(sd, data);
        assertTrue(Double.isFinite(last) && last < 0.25 * first,
                "sd.fit did not learn the previous-token task: loss " + first + " -> " + last);

        File file = dir.resolve("model.fb").toFile();
        sd.save(file, true);
        SameDiff loaded = SDAttention.load(file, true);
        Map<String, INDArray> ph = Map.of("x", features);
        assertEquals(sd.output(ph, "logits").get("logits"), loaded.output(ph, "logits").get("logits"),
                "the loaded model computes other logits");
        assertEquals(last, loss(loaded, data), 1e-6, "the loaded model has another loss");
        // The updater state came along: one more step of each takes the loaded model where it takes the original
        // (a fresh Adam state would take a different, larger first step).
        loaded.fit(data);
        sd.fit(data);
        assertEquals(loss(sd, data), loss(loaded, data), 1e-6,
                "one more step took the loaded model elsewhere than the original: its updater state did not come along");
    }

    private static double loss(SameDiff sd, DataSet d) {
        return sd.output(Map.of("x", d.getFeatures(), "labels", d.getLabels()), "loss").get("loss").getDouble(0);
    }
}
