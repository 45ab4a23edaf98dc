package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Stream;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.attn4j.distributed.launch.LaunchResult;
import org.attn4j.distributed.launch.LocalLauncher;
import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.sequence.SequenceLayout;
import org.attn4j.distributed.testing.Ranks;
import org.attn4j.distributed.training.CheckpointExport;
import org.attn4j.distributed.training.DistributedDecoder;
import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.Packing;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.InJvmTransport;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.KeyValueCaches;
import org.attn4j.layers.LayerNormLayer;
import org.attn4j.layers.LinearAttentionLayer;
import org.attn4j.layers.PackedSequences;
import org.attn4j.layers.PositionalEmbeddingLayer;
import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.ops.samediff.SDAttention;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.graph.ElementWiseVertex;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.attn4j.models.hf.HfDecoder;
import org.attn4j.models.hf.HfFineTuner;
import org.attn4j.models.hf.HfTokenizer;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.autodiff.samediff.TrainingConfig;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * The documentation cannot rot: every Java block of README.md and docs/*.md is one of the snippets of this class
 * or of {@link DocSnippetWorker}, word for word (checked), and every snippet is compiled with them and run: here,
 * or in four worker processes for the blocks that need a launcher.
 */
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class DocSnippetsTest {

    private static final Path ROOT = Path.of("..");
    private static final Path SOURCES = Path.of("src", "test", "java", "org", "attn4j", "samples");

    @TempDir
    File tmp;

    @Test
    void everyJavaBlockOfTheDocsIsASnippet() throws Exception {
        Map<String, String> snippets = regions(Files.readString(SOURCES.resolve("DocSnippetsTest.java")));
        Map<String, String> workers = regions(Files.readString(SOURCES.resolve("DocSnippetWorker.java")));
        for (String name : workers.keySet()) {
            assertTrue(!snippets.containsKey(name), "snippet '" + name + "' defined twice");
        }
        snippets.putAll(workers);
        List<Path> docs = new ArrayList<>(List.of(ROOT.resolve("README.md")));
        try (Stream<Path> files = Files.list(ROOT.resolve("docs"))) {
            files.filter(f -> f.toString().endsWith(".md")).sorted().forEach(docs::add);
        }
        Set<String> shown = new HashSet<>();
        for (Path doc : docs) {
            String text = Files.readString(doc);
            Matcher m = Pattern.compile("<!-- snippet: (\\S+) -->\\s*```java\\n(.*?)```", Pattern.DOTALL).matcher(text);
            int blocks = 0;
            while (m.find()) {
                blocks++;
                String name = m.group(1);
                assertTrue(snippets.containsKey(name), doc + ": snippet '" + name + "' has no region in " + SOURCES);
                assertEquals(snippets.get(name).strip(), m.group(2).strip(), doc + ": snippet '" + name + "'");
                assertTrue(shown.add(name), "snippet '" + name + "' shown twice");
            }
            long javaBlocks = Pattern.compile("```java").matcher(text).results().count();
            assertEquals(javaBlocks, blocks, doc + ": every ```java block must be a named snippet");
        }
        assertEquals(snippets.keySet(), shown, "every snippet region must appear in the docs");
    }

    @Test
    void readme() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        INDArray q = Nd4j.randn(DataType.FLOAT, 1, 8, 32, 16);
        INDArray k = Nd4j.randn(DataType.FLOAT, 1, 2, 32, 16);
        INDArray v = Nd4j.randn(DataType.FLOAT, 1, 2, 32, 16);
        SameDiff sd = SameDiff.create();
        SDVariable qVar = sd.var("q", q);
        SDVariable kVar = sd.var("k", k);
        SDVariable vVar = sd.var("v", v);
        // snippet: readme-api
        // ops on [B, H, N, D] arrays; k and v may have fewer heads than q (GQA)
        FlashAttention flash = FlashAttention.defaults();
        AttentionOutput out = flash.forward(q, k, v, AttentionMask.causal(), FlashAttention.defaultScale(q.size(3)));
        LinearAttentionOutput lin = LinearAttention.defaults().forward(q, k, v, Decay.of(0.99), true, null);

        // DL4J layers, in MultiLayerNetwork and ComputationGraph configurations
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().seed(42).updater(new Adam(1e-3)).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(256).nOut(128).outputDataFormat(RNNFormat.NCW).build())
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(4096).width(128).build())
                .layer(new FlashAttentionLayer.Builder().nIn(128).nOut(128).nHeads(8).nKvHeads(2).causal(true).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(128).nOut(256).dataFormat(RNNFormat.NCW).build())
                .build();

        // SameDiff: a function of SDVariables with exact gradients
        SDVariable o = SDAttention.flash(qVar, kVar, vVar).causal(true).build("attn");
        // end snippet
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        net.fit(tokens(2, 32, 256));
        assertTrue(Double.isFinite(net.score()));
        assertEquals(q.shapeInfoToString(), out.output().shapeInfoToString());
        assertEquals(q.shapeInfoToString(), lin.output().shapeInfoToString());
        assertEquals(out.output(), sd.output(Map.of(), "attn").get("attn"));
    }

    @Test
    void sameDiffFunctions() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        List<InJvmTransport> world = InJvmTransport.group(1, Duration.ofSeconds(30));
        Transport transport = world.get(0);
        int workers = 1;
        int n = 8;
        long heads = 2;
        long kvHeads = 1;
        SameDiff sd = SameDiff.create();
        SDVariable q = sd.var("q", Nd4j.randn(DataType.DOUBLE, 1, heads, n, 4));
        SDVariable k = sd.var("k", Nd4j.randn(DataType.DOUBLE, 1, kvHeads, n, 4));
        SDVariable v = sd.var("v", Nd4j.randn(DataType.DOUBLE, 1, kvHeads, n, 4));
        SDVariable theta = sd.var("theta", Nd4j.valueArrayOf(new long[] {heads}, 2.0, DataType.DOUBLE));
        SDVariable qShard = q;
        SDVariable kShard = k;
        SDVariable vShard = v;
        int rank = 0;
        // snippet: samediff-functions
        SDVariable o = SDAttention.flash(q, k, v).causal(true).build("attn");
        SDVariable y = SDAttention.linear(q, k, v).causal(true).decay(sd.nn.sigmoid(theta)).build("lin");

        // on every worker: its shards of q, k, v, and an algorithm on its transport
        SequenceAlgorithm ring = SequenceAlgorithm.byName("ring");
        SequenceAlgorithm.Settings settings = SequenceAlgorithm.Settings.of(workers, n, /* causal */ true)
                .withHeads(heads, kvHeads).withLayout(SequenceLayout.ZIGZAG);
        SDVariable s = SDAttention.sequenceParallel(qShard, kShard, vShard, ring.create(transport, settings))
                .build("ring");

        // rotary positions: q and k rotated at 0..N-1, or at this worker's global positions
        RotaryEmbedding rope = RotaryEmbedding.of(10_000);
        SDVariable r = SDAttention.flash(q, k, v).causal(true).rope(rope).build("rope");
        SDVariable rs = SDAttention.sequenceParallel(qShard, kShard, vShard, ring.create(transport, settings))
                .rope(rope, sd.constant(Nd4j.createFromArray(SequenceLayout.ZIGZAG.positions(rank, workers, n))), n)
                .build("ropeRing");
        // end snippet
        try {
            Map<String, INDArray> outs = sd.output(Map.of(), "attn", "lin", "ring", "rope", "ropeRing");
            assertTrue(outs.get("attn").equalsWithEps(outs.get("ring"), 1e-12), "one ring worker = flash");
            assertTrue(outs.get("rope").equalsWithEps(outs.get("ropeRing"), 1e-12), "with RoPE too");
            assertTrue(!outs.get("rope").equalsWithEps(outs.get("attn"), 1e-6), "RoPE changes the result");
            assertEquals(heads, outs.get("lin").size(1));
        } finally {
            world.forEach(Transport::close);
        }
    }

    @Test
    void blocksThatNeedWorkerProcesses() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        Path checkpointDir = tmp.toPath().resolve("ckpt");
        List<String> lines = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(DocSnippetWorker.WORKERS, DocSnippetWorker.class.getName())
                .args(List.of(checkpointDir.toString())).heap("512m").timeout(Duration.ofMinutes(5))
                .output(lines::add, lines::add).build().run();
        String all = String.join("\n", lines);
        assertEquals(0, r.exitCode(), r + "\n" + all);
        for (int rank = 0; rank < DocSnippetWorker.WORKERS; rank++) {
            assertTrue(lines.contains("[rank " + rank + "] SNIPPETS OK"), "rank " + rank + ":\n" + all);
        }
        Path modelZip = tmp.toPath().resolve("model.zip");
        // snippet: training-export
        CheckpointExport.export(checkpointDir, modelZip);                          // the same, from Java
        MultiLayerNetwork net = MultiLayerNetwork.load(modelZip.toFile(), false);  // or ComputationGraph.load
        // end snippet
        MultiLayerNetwork fresh = new MultiLayerNetwork(DocSnippetWorker.conf());
        fresh.init();
        assertEquals(fresh.numParams(), net.numParams());
        assertEquals(DocSnippetWorker.STEPS, net.getIterationCount());
        assertTrue(!fresh.params().equals(net.params()), "the exported model is the trained one");
    }

    @Test
    void ops() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        INDArray q = Nd4j.randn(DataType.FLOAT, 1, 4, 64, 16);
        INDArray k = Nd4j.randn(DataType.FLOAT, 1, 2, 64, 16);
        INDArray v = Nd4j.randn(DataType.FLOAT, 1, 2, 64, 16);
        INDArray dOut = Nd4j.randn(DataType.FLOAT, 1, 4, 64, 16);
        // snippet: ops
        FlashAttention flash = FlashAttention.defaults();
        double scale = FlashAttention.defaultScale(q.size(3));                  // 1/sqrt(D)
        AttentionOutput out = flash.forward(q, k, v, AttentionMask.causal(), scale);   // q [B,H,N,D], k/v [B,Hkv,N,D]
        AttentionGradients g = flash.backward(q, k, v, out.output(), out.lse(), dOut, AttentionMask.causal(), scale);

        LinearAttentionOutput lin = LinearAttention.defaults().forward(q, k, v, Decay.of(0.99), /* causal */ true,
                /* incoming state */ null);
        // end snippet
        assertEquals(q.shapeInfoToString(), g.dq().shapeInfoToString());
        assertEquals(4, lin.output().size(1));
    }

    @Test
    void generation() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder().seed(3).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(50).nOut(32).outputDataFormat(RNNFormat.NCW).build())
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(256).width(32).build())
                .layer(new FlashAttentionLayer.Builder().nIn(32).nOut(32).nHeads(4).nKvHeads(2).causal(true).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(32).nOut(50).dataFormat(RNNFormat.NCW).build())
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        INDArray prompt = tokens(1, 40, 50).getFeatures();
        int maxNewTokens = 16;
        // snippet: generation
        KeyValueCaches.reserve(net, (int) prompt.size(2) + maxNewTokens);   // optional: allocate the caches once
        INDArray probabilities = net.rnnTimeStep(prompt);                  // [1, vocab, N]: the prompt in one call
        for (int i = 0; i < maxNewTokens; i++) {
            int token = Nd4j.argMax(probabilities.get(NDArrayIndex.all(), NDArrayIndex.all(),
                    NDArrayIndex.point(probabilities.size(2) - 1)), 1).getInt(0);
            probabilities = net.rnnTimeStep(Nd4j.createFromArray(new float[][][] {{{token}}}));   // one step
        }
        long cacheBytes = KeyValueCaches.bytes(net);                        // what the caches hold now
        net.rnnClearPreviousState();                                        // the next sequence starts afresh
        // end snippet
        assertEquals(56 * KeyValueCaches.bytesPerStep((FlashAttentionLayer) net.getLayer(2).conf().getLayer(), 4),
                cacheBytes);
        assertEquals(1, probabilities.size(2));

        List<Transport> world = new ArrayList<>(InJvmTransport.group(2, Duration.ofSeconds(30)));
        List<INDArray> firsts = new CopyOnWriteArrayList<>();
        List<Thread> workers = new ArrayList<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        for (Transport transport : world) {
            MultiLayerNetwork copy = net.clone();
            workers.add(new Thread(() -> {
                try {
                    Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
                    MultiLayerNetwork network = copy;
                    INDArray token = Nd4j.createFromArray(new float[][][] {{{7}}});
                    // snippet: distributed-decoding
                    // on every worker of a sequence group, with the same prompt and the same steps
                    DistributedDecoder decoder = DistributedDecoder.of(network, transport,
                            ParallelStrategy.sequence("ring", 2));
                    INDArray first = decoder.prefill(prompt, maxNewTokens);   // [1, vocab, 1] after the prompt
                    INDArray next = decoder.step(token);                      // [1, vocab, 1] after one more step
                    // end snippet
                    firsts.add(first);
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        workers.forEach(Thread::start);
        for (Thread w : workers) {
            w.join();
        }
        world.forEach(Transport::close);
        assertEquals(List.of(), failures);
        INDArray alone = net.rnnTimeStep(prompt);
        for (INDArray first : firsts) {
            assertTrue(first.equalsWithEps(alone.get(NDArrayIndex.all(), NDArrayIndex.all(),
                    NDArrayIndex.interval(39, 40)), 1e-5), "the prefill over two workers = one device");
        }
    }

    @Test
    void packedSequences() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        INDArray q = Nd4j.randn(DataType.FLOAT, 2, 4, 8, 16);
        INDArray k = Nd4j.randn(DataType.FLOAT, 2, 2, 8, 16);
        INDArray v = Nd4j.randn(DataType.FLOAT, 2, 2, 8, 16);
        DataSet batch = tokens(2, 8, 50);
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().seed(1).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(50).nOut(16).outputDataFormat(RNNFormat.NCW).build())
                .layer(new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(2).causal(true).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(16).nOut(50).dataFormat(RNNFormat.NCW).build())
                .build());
        net.init();
        // snippet: packed
        Documents docs = Documents.of(new int[][] {{0, 0, 0, 1, 1, 1, 1, 2},        // [B, N] ids by position
                                                   {0, 0, 0, 0, 0, 1, -1, -1}});   // -1: padding
        AttentionMask mask = AttentionMask.builder().causal(true).documents(docs).build();
        AttentionOutput out = FlashAttention.defaults().forward(q, k, v, mask, FlashAttention.defaultScale(16));
        LinearAttentionOutput lin = LinearAttention.defaults().forward(q, k, v, Decay.of(0.99), true, null, docs);

        try (PackedSequences.Scope scope = PackedSequences.enter(docs)) {
            net.fit(batch);                       // every attention layer stays inside each document
        }
        Packing.attach(batch, docs);              // for DistributedTrainer: the ids travel with the DataSet
        // end snippet
        assertEquals(Double.NEGATIVE_INFINITY, out.lse().getDouble(1, 0, 7));
        assertEquals(0.0, lin.output().getDouble(1, 0, 6, 0));
        assertEquals(docs, Packing.of(batch));
    }

    @Test
    void multiLayerNetwork() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        DataSet batch = tokens(4, 32, 50);
        // snippet: mln
        MultiLayerConfiguration conf = new NeuralNetConfiguration.Builder()
                .seed(1).updater(new Adam(1e-3)).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(50).nOut(64).outputDataFormat(RNNFormat.NCW).build())
                .layer(new PositionalEmbeddingLayer.Builder().maxLength(1024).width(64).build())
                .layer(new FlashAttentionLayer.Builder().nIn(64).nOut(64).nHeads(8).nKvHeads(2).causal(true).build())
                .layer(new LinearAttentionLayer.Builder().nIn(64).nOut(64).nHeads(8).causal(true).decay(0.99).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(64).nOut(50).dataFormat(RNNFormat.NCW).build())
                .build();
        MultiLayerNetwork net = new MultiLayerNetwork(conf);
        net.init();
        net.fit(batch);                                   // features [B, 1, N] token ids, labels [B, 50, N]

        String json = conf.toJson();                      // the layers serialise like DL4J's own
        MultiLayerConfiguration again = MultiLayerConfiguration.fromJson(json);
        ModelSerializer.writeModel(net, new File(tmp, "model.zip"), true);
        MultiLayerNetwork restored = ModelSerializer.restoreMultiLayerNetwork(new File(tmp, "model.zip"), true);
        // end snippet
        assertEquals(conf, again);
        assertEquals(net.params(), restored.params());
    }

    @Test
    void computationGraph() {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        DataSet batch = tokens(2, 16, 50);
        // snippet: graph
        ComputationGraphConfiguration conf = new NeuralNetConfiguration.Builder()
                .seed(1).updater(new Adam(1e-3)).graphBuilder()
                .addInputs("in")
                .addLayer("embed", new EmbeddingSequenceLayer.Builder().nIn(50).nOut(64)
                        .outputDataFormat(RNNFormat.NCW).build(), "in")
                .addLayer("norm", new LayerNormLayer.Builder().nIn(64).build(), "embed")
                .addLayer("attn", new FlashAttentionLayer.Builder().nIn(64).nOut(64).nHeads(4).causal(true).build(),
                        "norm")
                .addVertex("residual", new ElementWiseVertex(ElementWiseVertex.Op.Add), "embed", "attn")
                .addLayer("out", new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT)
                        .activation(Activation.SOFTMAX).nIn(64).nOut(50).dataFormat(RNNFormat.NCW).build(),
                        "residual")
                .setOutputs("out").build();
        ComputationGraph graph = new ComputationGraph(conf);
        graph.init();
        graph.fit(batch);
        // end snippet
        assertTrue(Double.isFinite(graph.score()));
    }

    @Test
    void distributedTrainer() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        DataSet batch = tokens(4, 32, 50);
        List<Double> scores = Ranks.runInJvm(2, Duration.ofSeconds(30), Duration.ofSeconds(120), transport -> {
            MultiLayerNetwork net = smallNet();          // the same seed on every worker
            // snippet: trainer
            DistributedTrainer trainer = DistributedTrainer.builder(net, transport)
                    .strategy(ParallelStrategy.sequence("ring", 2)   // 2 workers per sequence
                            .withZero(ZeroStage.GRADIENTS))
                    .build();
            double score = trainer.fit(batch);           // every worker passes the same whole batch
            // end snippet
            return score;
        });
        MultiLayerNetwork single = smallNet();
        single.fit(batch);
        for (double score : scores) {
            assertEquals(single.score(), score, 1e-4 * Math.abs(single.score()));
        }
    }

    @Test
    void huggingFaceModel() throws Exception {
        Path modelDir = Path.of("..", "..", "shared", "fixtures", "hf-tiny", "llama-gqa-f32", "model")
                .toAbsolutePath().normalize();
        Path tokenizerDir = modelDir.resolve("../../../tokenizer-bpe").normalize();
        org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.isDirectory(modelDir), "no fixture");
        INDArray tokens = Nd4j.createFromArray(new long[][] {{1, 5, 9, 2}});
        Path outDir = tmp.toPath().resolve("out");
        // snippet: hf-model
        HfDecoder model = HfDecoder.load(modelDir, DataType.FLOAT);   // config.json + safetensors
        INDArray logits = model.logits(tokens);          // token ids [B, N] -> [B, N, vocab]
        ComputationGraph graph = model.graph();          // train it, serialise it, run it sequence-parallel
        model.save(outDir, "BF16", 2L << 30);            // config.json + safetensors, 2 GiB shards

        try (HfTokenizer tokenizer = HfTokenizer.load(tokenizerDir)) {   // its tokenizer.json
            long[] ids = tokenizer.encode("The cat sat");
            String text = tokenizer.decode(ids);
        }
        // end snippet
        assertEquals(83, logits.size(2));
        assertEquals(model.graph().numParams(), graph.numParams());
        assertTrue(java.nio.file.Files.isRegularFile(outDir.resolve("model.safetensors")));
        // snippet: rope-layer
        FlashAttentionLayer attention = new FlashAttentionLayer.Builder().nIn(576).nOut(576)
                .nHeads(9).nKvHeads(3).causal(true)
                .rope(RotaryEmbedding.builder().theta(100000)
                        .scaling(RotaryEmbedding.Scaling.YARN, 4).originalMaxPositions(8192).build())
                .qkvBias(false).outputBias(false)
                .build();
        // end snippet
        assertEquals(64, attention.effectiveHeadSize());
    }

    @Test
    void huggingFaceFineTuning() throws Exception {
        Path modelDir = Path.of("..", "..", "shared", "fixtures", "hf-tiny", "llama-gqa-f32", "model")
                .toAbsolutePath().normalize();
        org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.isDirectory(modelDir), "no fixture");
        long[][] sequences = {{1, 5, 9, 2, 7, 3, 8, 4}, {4, 4, 6, 1, 0, 2, 9, 5}};
        Path tuned = tmp.toPath().resolve("tuned");
        List<Double> losses = org.attn4j.distributed.testing.Ranks.runInJvm(4, java.time.Duration.ofSeconds(60),
                java.time.Duration.ofMinutes(2), transport -> {
                    Path outDir = tuned.resolve(Integer.toString(transport.rank()));
                    // snippet: hf-finetune
                    HfDecoder model = HfDecoder.load(modelDir, DataType.FLOAT);
                    HfFineTuner tuner = HfFineTuner.builder(model, transport)   // alone: InJvmTransport.group(1, timeout).get(0)
                            .strategy(ParallelStrategy.sequence("ring", 4).withZero(ZeroStage.GRADIENTS))
                            .learningRate(2e-5).warmupSteps(10).steps(200).clipGradientNorm(1.0).build();
                    double loss = tuner.step(HfFineTuner.batch(sequences, DataType.FLOAT));   // long[B][N] token ids
                    model.save(outDir, "BF16", 2L << 30);
                    // end snippet
                    assertTrue(java.nio.file.Files.isRegularFile(outDir.resolve("model.safetensors")));
                    return loss;
                });
        assertEquals(losses.get(0), losses.get(3), "every rank reports the batch's loss");
        assertTrue(losses.get(0) > 0 && losses.get(0) < 10, losses.toString());
    }

    @Test
    void huggingFaceModelInTheReadme() throws Exception {
        Path fixture = Path.of("..", "..", "shared", "fixtures", "hf-tiny", "qwen2-bias-tied-bf16")
                .toAbsolutePath().normalize();
        org.junit.jupiter.api.Assumptions.assumeTrue(java.nio.file.Files.isDirectory(fixture), "no fixture");
        Path modelDir = fixture.resolve("model");
        long[] promptIds = Nd4j.createFromNpyFile(fixture.resolve("prompt.npy").toFile()).toLongVector();
        Path outDir = tmp.toPath().resolve("qwen2");
        // snippet: hf-readme
        HfDecoder model = HfDecoder.load(modelDir, DataType.FLOAT);      // config.json + safetensors
        long[] next = model.generate(promptIds, 12, 0.0, 0, 1.0, 1);     // 12 greedy tokens, key/value cache
        model.save(outDir, "BF16", 2L << 30);                            // back to Hugging Face's layout
        // end snippet
        assertArrayEquals(Nd4j.createFromNpyFile(fixture.resolve("greedy.npy").toFile()).toLongVector(), next,
                "transformers' greedy tokens");
        assertEquals(model.graph().params(), HfDecoder.load(outDir, DataType.FLOAT).graph().params());
    }

    @Test
    void sameDiff() throws Exception {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        Nd4j.getRandom().setSeed(5);
        INDArray features = Nd4j.randn(DataType.FLOAT, 2, 64, 32);
        INDArray labels = features.mul(0.5);
        File file = new File(tmp, "attention.fb");
        // snippet: samediff
        SameDiff sd = SameDiff.create();
        SDVariable x = sd.placeHolder("x", DataType.FLOAT, 2, 64, 32);         // [B, N, C]: 4 heads of 8
        SDVariable y = sd.placeHolder("y", DataType.FLOAT, 2, 64, 32);
        SDVariable[] qkv = new SDVariable[3];
        for (int i = 0; i < 3; i++) {
            SDVariable w = sd.var("w" + i, Nd4j.randn(DataType.FLOAT, 32, 32).muli(0.2));
            qkv[i] = x.reshape(-1, 32).mmul(w).reshape(2, 64, 4, 8).permute(0, 2, 1, 3);   // [B, H, N, D]
        }
        SDVariable o = SDAttention.flash(qkv[0], qkv[1], qkv[2]).causal(true).build("attn");
        SDVariable out = o.permute(0, 2, 1, 3).reshape(2, 64, 32);
        sd.loss.meanSquaredError("loss", y, out, null);
        sd.setTrainingConfig(TrainingConfig.builder().updater(new Adam(1e-2))
                .dataSetFeatureMapping("x").dataSetLabelMapping("y").build());
        sd.fit(new DataSet(features, labels));                 // exact gradients, no N x N array

        sd.save(file, true);                                   // graph, weights, settings, updater state
        SameDiff restored = SDAttention.load(file, true);      // registers the attn4j ops, then SameDiff.load
        // end snippet
        Map<String, INDArray> in = Map.of("x", features);
        assertEquals(sd.output(in, "attn").get("attn"), restored.output(in, "attn").get("attn"));
    }

    private static MultiLayerNetwork smallNet() {
        MultiLayerNetwork net = new MultiLayerNetwork(new NeuralNetConfiguration.Builder().seed(3)
                .updater(new Adam(1e-3)).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(50).nOut(16).outputDataFormat(RNNFormat.NCW).build())
                .layer(new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(2).causal(true).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(16).nOut(50).dataFormat(RNNFormat.NCW).build())
                .build());
        net.init();
        return net;
    }

    private static DataSet tokens(int b, int n, int vocab) {
        INDArray features = Nd4j.zeros(DataType.FLOAT, b, 1, n);
        INDArray labels = Nd4j.zeros(DataType.FLOAT, b, vocab, n);
        for (int i = 0; i < b; i++) {
            for (int t = 0; t < n; t++) {
                features.putScalar(new int[] {i, 0, t}, (7 * i + t) % vocab);
                labels.putScalar(new int[] {i, (7 * i + t + 1) % vocab, t}, 1.0);
            }
        }
        return new DataSet(features, labels);
    }

    /** The regions between "// snippet: NAME" and "// end snippet", de-indented. */
    private static Map<String, String> regions(String source) {
        Map<String, String> out = new LinkedHashMap<>();
        Matcher m = Pattern.compile("// snippet: (\\S+)\\n(.*?)\\n\\s*// end snippet", Pattern.DOTALL).matcher(source);
        while (m.find()) {
            List<String> lines = m.group(2).lines().toList();
            int indent = lines.stream().filter(l -> !l.isBlank()).mapToInt(l -> l.length() - l.stripLeading()
                    .length()).min().orElse(0);
            StringBuilder b = new StringBuilder();
            for (String l : lines) {
                b.append(l.isBlank() ? "" : l.substring(indent)).append('\n');
            }
            out.put(m.group(1), b.toString());
        }
        return out;
    }
}
