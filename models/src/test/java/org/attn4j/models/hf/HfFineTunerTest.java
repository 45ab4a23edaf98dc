package org.attn4j.models.hf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.attn4j.distributed.testing.Ranks;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.WarmupCosineSchedule;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.layers.PackedSequences;
import org.attn4j.ops.Documents;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.learning.config.Adam;

/**
 * {@link HfFineTuner} in float64 on small random Llama and Qwen2 (tied) decoders: its loss is the mean cross-entropy
 * per predicted token of the model's own logits, its gradient norm DL4J's gradient of that mean, the head's bias
 * stays at zero, and the loss curve of two and four workers (ring in three layouts, Ulysses, all-gather K/V; ZeRO 0-3;
 * packed or not; with activation checkpointing or not) is one process's.
 */
class HfFineTunerTest {

    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    static HfConfig config(String type) {
        return TokenStepTest.config(type, 0);
    }

    static long[][] tokens(HfConfig c, int b, int n, long seed) {
        Random rnd = new Random(seed);
        long[][] t = new long[b][n];
        for (long[] row : t) {
            for (int i = 0; i < n; i++) {
                row[i] = rnd.nextInt(c.vocab());
            }
        }
        return t;
    }

    private static HfFineTuner oneProcess(HfDecoder model, double clip) {
        return HfFineTuner.builder(model, InJvmTransport.group(1, TIMEOUT).get(0)).learningRate(1e-3).warmupSteps(1)
                .steps(4).clipGradientNorm(clip).build();
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource({"llama", "qwen2"})
    void theLossIsTheMeanCrossEntropyPerPredictedTokenOfTheModelsLogits(String type) {
        HfConfig c = config(type);
        HfDecoder model = HfDecoder.random(c, DataType.DOUBLE, 5);
        long[][] t = tokens(c, 2, 12, 1);
        INDArray logits = model.logits(Nd4j.createFromArray(t));               // [B, N, V]
        double sum = 0;
        int count = 0;
        for (int b = 0; b < t.length; b++) {
            for (int i = 0; i + 1 < t[b].length; i++) {
                sum += crossEntropy(logits, b, i, t[b][i + 1]);
                count++;
            }
        }
        double loss = oneProcess(model, 1.0).step(HfFineTuner.batch(t, DataType.DOUBLE));
        assertEquals(sum / count, loss, 1e-10 * Math.abs(loss));
    }

    @Test
    void theGradientNormIsThatOfTheMeanLossOverEveryTrainedParameterAndTheHeadBiasStaysZero() {
        HfConfig c = config("llama");
        HfDecoder model = HfDecoder.random(c, DataType.DOUBLE, 9);
        ComputationGraph graph = model.graph();
        long[][] t = tokens(c, 3, 10, 2);
        DataSet d = HfFineTuner.batch(t, DataType.DOUBLE);
        // DL4J's own gradient of the batch (a sum over the predicted tokens), divided by their number.
        ComputationGraph copy = graph.clone();
        copy.setInputs(d.getFeatures());
        copy.setLabels(d.getLabels());
        copy.setLayerMaskArrays(null, new INDArray[] {d.getLabelsMaskArray()});
        copy.computeGradientAndScore();
        double squares = 0;
        for (Map.Entry<String, INDArray> g : copy.gradient().gradientForVariable().entrySet()) {
            if (!g.getKey().equals("head_b")) {
                double n = g.getValue().norm2Number().doubleValue() / (3 * 9);     // per predicted token
                squares += n * n;
            }
        }
        Map<String, INDArray> before = new java.util.HashMap<>();
        graph.paramTable().forEach((k, v) -> before.put(k, v.dup()));
        HfFineTuner tuner = oneProcess(model, 1e-3);
        tuner.step(d);
        assertEquals(Math.sqrt(squares), tuner.gradientNorm(), 1e-10 * Math.sqrt(squares));
        assertTrue(tuner.gradientNorm() > 1e-3, "the norm clips at 1e-3 in this test: " + tuner.gradientNorm());
        tuner.step(HfFineTuner.batch(tokens(c, 3, 10, 3), DataType.DOUBLE));
        assertEquals(0.0, graph.getParam("head_b").norm2Number().doubleValue(), "the head's bias is frozen at 0");
        for (Map.Entry<String, INDArray> p : graph.paramTable().entrySet()) {
            if (!p.getKey().equals("head_b")) {
                assertNotEquals(before.get(p.getKey()), p.getValue(), p.getKey() + " trained");
            }
        }
    }

    /** Two documents of 5 and 11 tokens packed in each sequence of 16, and three documents of 4, 7 and 5. */
    static int[][] packedDocuments() {
        int[][] d = new int[2][16];
        for (int t = 0; t < 16; t++) {
            d[0][t] = t < 5 ? 0 : 1;
            d[1][t] = t < 4 ? 0 : t < 11 ? 1 : 2;
        }
        return d;
    }

    /**
     * Packed documents with positions restarting at each: every document's logits inside the packed sequence are
     * those of the document alone, and the loss is the mean cross-entropy over the positions whose next token is in
     * the same document.
     */
    @Test
    void aPackedDocumentGivesTheLogitsOfItselfAloneAndOnlyItsOwnNextTokensAreScored() {
        HfConfig c = config("llama");
        HfDecoder model = HfDecoder.random(c, DataType.DOUBLE, 13).restartPositionsPerDocument(true);
        long[][] t = tokens(c, 2, 16, 4);
        int[][] docs = packedDocuments();
        INDArray packed;
        try (PackedSequences.Scope s = PackedSequences.enter(Documents.of(docs))) {
            packed = model.logits(Nd4j.createFromArray(t));
        }
        double sum = 0;
        int count = 0;
        for (int b = 0; b < 2; b++) {
            int start = 0;
            while (start < 16) {
                int end = start;
                while (end < 16 && docs[b][end] == docs[b][start]) {
                    end++;
                }
                long[] alone = java.util.Arrays.copyOfRange(t[b], start, end);
                INDArray own = model.logits(Nd4j.createFromArray(new long[][] {alone}));
                INDArray inPack = packed.get(NDArrayIndex.point(b), NDArrayIndex.interval(start, end),
                        NDArrayIndex.all());
                assertEquals(0.0, inPack.sub(own.get(NDArrayIndex.point(0), NDArrayIndex.all(), NDArrayIndex.all()))
                        .amaxNumber().doubleValue(), 1e-12, "sequence " + b + ", document at " + start);
                for (int i = start; i + 1 < end; i++) {
                    sum += crossEntropy(packed, b, i, t[b][i + 1]);
                    count++;
                }
                start = end;
            }
        }
        double loss = oneProcess(model, 1.0).step(HfFineTuner.batch(t, docs, DataType.DOUBLE));
        assertEquals(sum / count, loss, 1e-10 * Math.abs(loss));
        assertEquals(2 * 16 - 5, count);
    }

    private static double crossEntropy(INDArray logits, int b, int i, long next) {
        double[] z = logits.get(NDArrayIndex.point(b), NDArrayIndex.point(i), NDArrayIndex.all()).toDoubleVector();
        double max = Double.NEGATIVE_INFINITY;
        for (double v : z) {
            max = Math.max(max, v);
        }
        double norm = 0;
        for (double v : z) {
            norm += Math.exp(v - max);
        }
        return max + Math.log(norm) - z[(int) next];
    }

    @ParameterizedTest(name = "{0} {1} P={2} ZeRO {3} packed {4} checkpointing {5}")
    @CsvSource({"llama, ring, 2, 3, false, false", "qwen2, zigzag, 2, 1, false, false",
        "llama, ulysses, 2, 2, false, false", "qwen2, ring, 2, 0, false, false", "llama, zigzag, 2, 3, true, false",
        "qwen2, ulysses, 2, 1, true, false", "llama, ring, 2, 0, true, false", "llama, striped, 4, 3, true, false",
        "qwen2, allgather, 4, 2, false, false", "llama, zigzag, 4, 1, true, false", "qwen2, ring, 4, 0, false, false",
        "llama, ring, 2, 3, false, true", "qwen2, zigzag, 4, 3, true, true", "llama, ulysses, 2, 0, true, true"})
    void workersTakeOneProcesssSteps(String type, String algorithm, int p, int zero, boolean packed,
                                     boolean checkpointing) throws Exception {
        HfConfig c = config(type);
        List<DataSet> batches = new ArrayList<>();
        for (int s = 0; s < 3; s++) {
            batches.add(HfFineTuner.batch(tokens(c, 2, 16, 10 + s), packed ? packedDocuments() : null,
                    DataType.DOUBLE));
        }
        HfDecoder single = HfDecoder.random(c, DataType.DOUBLE, 11).restartPositionsPerDocument(packed);
        HfFineTuner one = oneProcess(single, 0.5);
        List<Double> expected = new ArrayList<>();
        for (DataSet d : batches) {
            expected.add(one.step(d));
        }
        boolean layout = algorithm.equals("zigzag") || algorithm.equals("striped");
        String algo = layout ? "ring" : algorithm;
        List<Object[]> ranks = Ranks.runInJvm(p, TIMEOUT, Duration.ofMinutes(2), tr -> {
            HfDecoder model = HfDecoder.random(c, DataType.DOUBLE, 11).restartPositionsPerDocument(packed)
                    .activationCheckpointing(checkpointing);
            ParallelStrategy s = ParallelStrategy.sequence(algo, p).withZero(ZeroStage.of(zero));
            if (layout) {
                s = s.withLayout(org.attn4j.distributed.sequence.SequenceLayout.valueOf(algorithm.toUpperCase(
                        java.util.Locale.ROOT)));
            }
            HfFineTuner tuner = HfFineTuner.builder(model, tr).strategy(s).learningRate(1e-3).warmupSteps(1)
                    .steps(4).clipGradientNorm(0.5).build();
            List<Double> losses = new ArrayList<>();
            for (DataSet d : batches) {
                losses.add(tuner.step(d));
            }
            return new Object[] {losses, model.graph().params().dup()};
        });
        for (Object[] r : ranks) {
            @SuppressWarnings("unchecked")
            List<Double> losses = (List<Double>) r[0];
            for (int s = 0; s < expected.size(); s++) {
                assertEquals(expected.get(s), losses.get(s), 1e-10 * expected.get(s), "step " + s);
            }
            INDArray params = (INDArray) r[1];
            double diff = params.sub(single.graph().params()).norm2Number().doubleValue();
            assertTrue(diff <= 1e-10 * single.graph().params().norm2Number().doubleValue(), "parameters differ by "
                    + diff);
        }
    }

    @Test
    void theScheduleWarmsUpThenFollowsHalfACosineAndSurvivesTheConfigurationsJson() {
        WarmupCosineSchedule s = new WarmupCosineSchedule(1e-3, 1e-4, 4, 14);
        assertEquals(0.25e-3, s.valueAt(0, 0), 1e-18);
        assertEquals(1e-3, s.valueAt(3, 0), 1e-18);
        assertEquals(1e-3, s.valueAt(4, 0), 1e-18);
        assertEquals(1e-4 + 0.9e-3 * 0.5, s.valueAt(9, 0), 1e-15);     // half way down the cosine
        assertEquals(1e-4, s.valueAt(14, 0), 1e-18);
        assertEquals(1e-4, s.valueAt(100, 0), 1e-18);
        HfDecoder model = HfDecoder.random(config("llama"), DataType.FLOAT, 1);
        HfFineTuner.builder(model, InJvmTransport.group(1, TIMEOUT).get(0)).learningRate(1e-3).minLearningRate(1e-4)
                .warmupSteps(4).steps(14).build();
        ComputationGraphConfiguration conf = ComputationGraphConfiguration.fromJson(
                model.graph().getConfiguration().toJson());
        org.deeplearning4j.nn.conf.layers.BaseLayer attn = (org.deeplearning4j.nn.conf.layers.BaseLayer)
                conf.getVertices().entrySet().stream().filter(e -> e.getKey().equals("attn_0")).findFirst()
                        .map(e -> ((org.deeplearning4j.nn.conf.graph.LayerVertex) e.getValue()).getLayerConf()
                                .getLayer()).orElseThrow();
        assertTrue(attn.getIUpdater() instanceof Adam a && s.equals(a.getLearningRateSchedule()),
                "Adam on the schedule after JSON: " + attn.getIUpdater());
    }
}
