package org.attn4j.models.hf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.attn4j.layers.FlashAttentionLayer;
import org.attn4j.layers.KeyValueCaches;
import org.attn4j.layers.LayerNormLayer;
import org.attn4j.layers.SwiGluLayer;
import org.attn4j.layers.TiedEmbeddingLayer;
import org.attn4j.layers.TiedEmbeddings;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.graph.ElementWiseVertex;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.weights.WeightInit;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * A Llama-family decoder (llama, mistral, qwen2) as a DL4J {@link ComputationGraph} of attn4j layers, built from a
 * {@link HfConfig}, loaded from and saved to a Hugging Face model directory:
 * <pre>
 *   in [B, 1, N] token ids
 *   embed                    EmbeddingSequenceLayer(vocab -> d)              model.embed_tokens
 *                            or, tied, TiedEmbeddingLayer (the head's W)     (one parameter with lm_head)
 *   block l   norm1_l        RMSNorm                                          model.layers.l.input_layernorm
 *             attn_l         FlashAttentionLayer(causal, GQA, RoPE)           model.layers.l.self_attn.{q,k,v,o}_proj
 *             res1_l         x + attn
 *             norm2_l        RMSNorm                                          model.layers.l.post_attention_layernorm
 *             mlp_l          SwiGluLayer                                      model.layers.l.mlp.{gate,up,down}_proj
 *             res2_l         res1 + mlp
 *   norm                     RMSNorm                                          model.norm
 *   head                     RnnOutputLayer(d -> vocab, softmax)              lm_head (the embedding when tied)
 * </pre>
 * The head's bias (DL4J 1.0.0-M2.1's RnnOutputLayer fails without one) starts and loads at zero; checkpoints of
 * these model types have none, and {@link HfFineTuner} keeps it there. The head's labels are the next tokens' ids
 * {@code [B, 1, N]} (sparse cross-entropy: no vocabulary-sized label array).
 * Hugging Face's Linear weights are {@code [out, in]}; attn4j's are {@code [in, out]}: loading and saving transpose.
 * RoPE pairs features as transformers' rotate-half, which checkpoints in this format expect.
 */
public final class HfDecoder {

    private static final ObjectMapper JSON = new ObjectMapper();
    /** Prompt tokens per {@code rnnTimeStep} call in {@link #prefill}. */
    static final int PREFILL_CHUNK = 512;

    private final HfConfig config;
    private final DecoderGraph graph;
    /** The single-token path of {@link #step}, made on first use. */
    private TokenStep tokenStep;

    private HfDecoder(HfConfig config, DecoderGraph graph) {
        this.config = config;
        this.graph = graph;
    }

    /** The files beside a checkpoint's weights that describe its tokenizer and generation. */
    public static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "generation_config.json", "vocab.json", "merges.txt", "tokenizer.model");

    /** Copies the {@link #TOKENIZER_FILES} that {@code from} holds into {@code to}, replacing any there. */
    public static void copyTokenizerFiles(Path from, Path to) throws IOException {
        for (String f : TOKENIZER_FILES) {
            if (Files.isRegularFile(from.resolve(f))) {
                Files.copy(from.resolve(f), to.resolve(f), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            }
        }
    }

    /**
     * Whether RoPE's positions restart at 0 at each document of a packed batch ({@code PackedSequences}, which
     * {@link HfFineTuner} enters for batches that carry document ids) instead of running on through the sequence:
     * the setting of every attention layer, false by default, as transformers' positions run on unless position ids
     * restart them. Returns this model.
     */
    public HfDecoder restartPositionsPerDocument(boolean restart) {
        for (org.deeplearning4j.nn.api.Layer layer : graph.getLayers()) {
            if (layer.conf().getLayer() instanceof FlashAttentionLayer attention) {
                attention.setRopeRestartsPerDocument(restart);
            }
        }
        graph.getConfiguration().getVertices().values().forEach(v -> {
            if (v instanceof org.deeplearning4j.nn.conf.graph.LayerVertex lv
                    && lv.getLayerConf().getLayer() instanceof FlashAttentionLayer attention) {
                attention.setRopeRestartsPerDocument(restart);
            }
        });
        return this;
    }

    /**
     * Whether training recomputes each decoder block's activations in the backward pass instead of keeping them
     * from the forward pass (off by default): activation memory per block falls to one {@code [B, hidden, N]}
     * array, for one more forward pass of the blocks; the loss and gradients are the same to the last bit.
     * Returns this model.
     */
    public HfDecoder activationCheckpointing(boolean on) {
        graph.activationCheckpointing(on);
        return this;
    }

    /** The configuration. */
    public HfConfig config() {
        return config;
    }

    /** The network. */
    public ComputationGraph graph() {
        return graph;
    }

    /** The graph configuration of {@code c} in {@code type} (FLOAT or DOUBLE), randomly initialised when built. */
    public static ComputationGraphConfiguration configuration(HfConfig c, DataType type, long seed) {
        ComputationGraphConfiguration.GraphBuilder g = new NeuralNetConfiguration.Builder()
                .seed(seed).dataType(type).updater(new Adam(1e-4)).weightInit(WeightInit.NORMAL)
                .graphBuilder()
                .addInputs("in")
                .addLayer("embed", c.tieWordEmbeddings()
                        ? new TiedEmbeddingLayer.Builder().width(c.hidden()).head("head").dataFormat(RNNFormat.NCW)
                                .build()
                        : new EmbeddingSequenceLayer.Builder().nIn(c.vocab()).nOut(c.hidden()).hasBias(false)
                                .outputDataFormat(RNNFormat.NCW).build(), "in");
        String x = "embed";
        for (int l = 0; l < c.layers(); l++) {
            g.addLayer("norm1_" + l, norm(c), x)
                    .addLayer("attn_" + l, new FlashAttentionLayer.Builder().nIn(c.hidden()).nOut(c.hidden())
                            .nHeads(c.heads()).nKvHeads(c.kvHeads()).headSize(c.headDim()).causal(true)
                            .slidingWindow(c.slidingWindow()).rope(c.rope()).qkvBias(c.qkvBias())
                            .outputBias(c.outputBias()).build(), "norm1_" + l)
                    .addVertex("res1_" + l, new ElementWiseVertex(ElementWiseVertex.Op.Add), x, "attn_" + l)
                    .addLayer("norm2_" + l, norm(c), "res1_" + l)
                    .addLayer("mlp_" + l, new SwiGluLayer.Builder().nIn(c.hidden()).hiddenSize(c.intermediate())
                            .bias(c.mlpBias()).build(), "norm2_" + l)
                    .addVertex("res2_" + l, new ElementWiseVertex(ElementWiseVertex.Op.Add), "res1_" + l, "mlp_" + l);
            x = "res2_" + l;
        }
        return g.addLayer("norm", norm(c), x)
                .addLayer("head", new RnnOutputLayer.Builder(LossFunctions.LossFunction.SPARSE_MCXENT)
                        .activation(Activation.SOFTMAX).nIn(c.hidden()).nOut(c.vocab()).biasInit(0)
                        .dataFormat(RNNFormat.NCW).build(), "norm")
                .setOutputs("head")
                .build();
    }

    /** A model of {@code c} with random weights (for benchmarks and tests), in {@code type}. */
    public static HfDecoder random(HfConfig c, DataType type, long seed) {
        DecoderGraph graph = new DecoderGraph(configuration(c, type, seed), c.layers());
        graph.init();
        TiedEmbeddings.bind(graph);
        return new HfDecoder(c, graph);
    }

    private static LayerNormLayer norm(HfConfig c) {
        return new LayerNormLayer.Builder(c.hidden()).rms(true).eps(c.rmsNormEps()).build();
    }

    /**
     * Loads {@code dir} (config.json and model.safetensors, or the shards of model.safetensors.index.json) into a
     * network of {@code type}, one tensor at a time into the network's parameters.
     *
     * @throws IllegalArgumentException one line naming the file and tensor that is missing, unexpected, of another
     *                                  shape, or damaged; nothing half-loaded is returned
     */
    public static HfDecoder load(Path dir, DataType type) throws IOException {
        return load(dir, HfConfig.read(dir), type);
    }

    /**
     * Loads the weights of {@code dir} into the network of {@code c}: the checkpoint's own configuration changed
     * where the weights do not depend on it, as {@link HfConfig#withRopeScaling} changes the rotary embedding.
     *
     * @throws IllegalArgumentException as {@link #load(Path, DataType)}, naming the tensors {@code c} does not fit
     */
    public static HfDecoder load(Path dir, HfConfig c, DataType type) throws IOException {
        Map<String, Safetensors> files = tensorFiles(dir);
        Map<String, Target> targets = targets(c);
        Set<String> unexpected = new TreeSet<>(files.keySet());
        unexpected.removeAll(targets.keySet());
        unexpected.removeIf(n -> n.endsWith("rotary_emb.inv_freq"));        // old checkpoints store the table
        if (c.tieWordEmbeddings()) {
            unexpected.remove("lm_head.weight");                              // some tied checkpoints keep a copy
        }
        if (!unexpected.isEmpty()) {
            throw new IllegalArgumentException(dir + ": unexpected tensors for a " + c.modelType() + " of "
                    + c.layers() + " layers: " + unexpected + " (" + files.get(unexpected.iterator().next()).file()
                    .getFileName() + ")");
        }
        for (String name : targets.keySet()) {
            if (!files.containsKey(name)) {
                throw new IllegalArgumentException(dir + ": tensor " + name + " is missing (config: " + c.modelType()
                        + ", " + c.layers() + " layers" + (c.tieWordEmbeddings() ? ", tied embeddings" : "") + ")");
            }
            Safetensors.Entry e = files.get(name).entries().get(name);
            long[] expected = targets.get(name).hfShape();
            if (!Arrays.equals(e.shape(), expected)) {
                throw new IllegalArgumentException(files.get(name).file() + ": tensor " + name + " has shape "
                        + Arrays.toString(e.shape()) + ", the config needs " + Arrays.toString(expected));
            }
        }
        DecoderGraph graph = new DecoderGraph(configuration(c, type, 0), c.layers());
        graph.init();
        TiedEmbeddings.bind(graph);
        for (Map.Entry<String, Target> t : targets.entrySet()) {
            INDArray value = files.get(t.getKey()).read(t.getKey(), type);
            INDArray p = graph.getParam(t.getValue().param());
            p.assign(t.getValue().transpose() ? value.transpose() : value.reshape(p.shape()));
        }
        return new HfDecoder(c, graph);
    }

    /**
     * Writes this model to {@code dir} in Hugging Face's layout: config.json (the one it was loaded from, its
     * unread keys kept, {@code dtype} set) and the weights in {@code dtype} ("F32" or "BF16"), in one
     * model.safetensors or, above {@code shardBytes}, in shards {@code model-0000i-of-0000n.safetensors} with
     * model.safetensors.index.json. Each file is written whole and then moved into place.
     */
    public void save(Path dir, String dtype, long shardBytes) throws IOException {
        Files.createDirectories(dir);
        int width = "F32".equals(dtype) ? 4 : 2;
        List<Map<String, INDArray>> shards = new java.util.ArrayList<>();
        Map<String, INDArray> current = new LinkedHashMap<>();
        long bytes = 0;
        for (Map.Entry<String, Target> t : targets(config).entrySet()) {
            INDArray p = graph.getParam(t.getValue().param());
            INDArray value = t.getValue().transpose() ? p.transpose().dup('c')
                    : p.dup('c').reshape(t.getValue().hfShape());
            long size = value.length() * width;
            if (!current.isEmpty() && bytes + size > shardBytes) {
                shards.add(current);
                current = new LinkedHashMap<>();
                bytes = 0;
            }
            current.put(t.getKey(), value);
            bytes += size;
        }
        shards.add(current);
        Map<String, String> format = Map.of("format", "pt");
        if (shards.size() == 1) {
            Safetensors.write(dir.resolve("model.safetensors"), shards.get(0), dtype, format);
            Files.deleteIfExists(dir.resolve("model.safetensors.index.json"));
        } else {
            var index = JSON.createObjectNode();
            index.putObject("metadata").put("total_size", totalBytes(shards, width));
            var map = index.putObject("weight_map");
            for (int i = 0; i < shards.size(); i++) {
                String name = String.format(java.util.Locale.ROOT, "model-%05d-of-%05d.safetensors", i + 1,
                        shards.size());
                Safetensors.write(dir.resolve(name), shards.get(i), dtype, format);
                for (String tensor : shards.get(i).keySet()) {
                    map.put(tensor, name);
                }
            }
            writeAtomically(dir.resolve("model.safetensors.index.json"), JSON.writerWithDefaultPrettyPrinter()
                    .writeValueAsString(index));
            Files.deleteIfExists(dir.resolve("model.safetensors"));
        }
        var json = config.json().deepCopy();
        json.put("dtype", "F32".equals(dtype) ? "float32" : "bfloat16");
        writeAtomically(dir.resolve("config.json"), JSON.writerWithDefaultPrettyPrinter().writeValueAsString(json));
    }

    private static long totalBytes(List<Map<String, INDArray>> shards, int width) {
        long total = 0;
        for (Map<String, INDArray> s : shards) {
            for (INDArray a : s.values()) {
                total += a.length() * width;
            }
        }
        return total;
    }

    private static void writeAtomically(Path file, String text) throws IOException {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Files.writeString(tmp, text);
        Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING,
                java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    /** Where an HF tensor goes: its shape in the checkpoint, and the graph's parameter, transposed or not. */
    private record Target(long[] hfShape, String param, boolean transpose) {
    }

    /** Every tensor a checkpoint of {@code c} holds, in Hugging Face's names, and where it goes. */
    private static Map<String, Target> targets(HfConfig c) {
        Map<String, Target> t = new LinkedHashMap<>();
        long d = c.hidden();
        long q = (long) c.heads() * c.headDim();
        long kv = (long) c.kvHeads() * c.headDim();
        // Tied: the embedding is the head's W [d, V] (TiedEmbeddingLayer), one parameter for the one tensor.
        long[] embed = {c.vocab(), d};
        t.put("model.embed_tokens.weight", c.tieWordEmbeddings() ? new Target(embed, "head_W", true)
                : new Target(embed, "embed_W", false));
        for (int l = 0; l < c.layers(); l++) {
            String hf = "model.layers." + l + ".";
            t.put(hf + "input_layernorm.weight", new Target(new long[] {d}, "norm1_" + l + "_g", false));
            linear(t, hf + "self_attn.q_proj", "attn_" + l + "_Wq", "attn_" + l + "_bq", q, d, c.qkvBias());
            linear(t, hf + "self_attn.k_proj", "attn_" + l + "_Wk", "attn_" + l + "_bk", kv, d, c.qkvBias());
            linear(t, hf + "self_attn.v_proj", "attn_" + l + "_Wv", "attn_" + l + "_bv", kv, d, c.qkvBias());
            linear(t, hf + "self_attn.o_proj", "attn_" + l + "_Wo", "attn_" + l + "_bo", d, q, c.outputBias());
            t.put(hf + "post_attention_layernorm.weight", new Target(new long[] {d}, "norm2_" + l + "_g", false));
            linear(t, hf + "mlp.gate_proj", "mlp_" + l + "_Wg", "mlp_" + l + "_bg", c.intermediate(), d, c.mlpBias());
            linear(t, hf + "mlp.up_proj", "mlp_" + l + "_Wu", "mlp_" + l + "_bu", c.intermediate(), d, c.mlpBias());
            linear(t, hf + "mlp.down_proj", "mlp_" + l + "_Wd", "mlp_" + l + "_bd", d, c.intermediate(), c.mlpBias());
        }
        t.put("model.norm.weight", new Target(new long[] {d}, "norm_g", false));
        if (!c.tieWordEmbeddings()) {
            t.put("lm_head.weight", new Target(new long[] {c.vocab(), d}, "head_W", true));
        }
        return t;
    }

    private static void linear(Map<String, Target> t, String hf, String w, String b, long out, long in,
                               boolean bias) {
        t.put(hf + ".weight", new Target(new long[] {out, in}, w, true));
        if (bias) {
            t.put(hf + ".bias", new Target(new long[] {out}, b, false));
        }
    }

    /** The tensors of {@code dir}: one model.safetensors, or the shards its index lists, by tensor name. */
    private static Map<String, Safetensors> tensorFiles(Path dir) throws IOException {
        Path single = dir.resolve("model.safetensors");
        Path index = dir.resolve("model.safetensors.index.json");
        Map<String, Safetensors> byTensor = new HashMap<>();
        if (Files.isRegularFile(index)) {
            JsonNode map = JSON.readTree(Files.readString(index)).get("weight_map");
            if (map == null || !map.isObject()) {
                throw new IllegalArgumentException(index + ": no weight_map object");
            }
            Map<String, Safetensors> shards = new HashMap<>();
            for (var it = map.fields(); it.hasNext(); ) {
                var f = it.next();
                String shard = f.getValue().asText();
                Safetensors s = shards.get(shard);
                if (s == null) {
                    Path p = dir.resolve(shard);
                    if (!Files.isRegularFile(p)) {
                        throw new IllegalArgumentException(index + ": lists shard " + shard + ", which is missing");
                    }
                    s = Safetensors.open(p);
                    shards.put(shard, s);
                }
                if (!s.entries().containsKey(f.getKey())) {
                    throw new IllegalArgumentException(s.file() + ": tensor " + f.getKey() + " is missing (the "
                            + "index puts it there)");
                }
                byTensor.put(f.getKey(), s);
            }
            return byTensor;
        }
        if (!Files.isRegularFile(single)) {
            throw new IllegalArgumentException(dir + ": neither model.safetensors nor model.safetensors.index.json");
        }
        Safetensors s = Safetensors.open(single);
        for (String name : s.entries().keySet()) {
            byTensor.put(name, s);
        }
        return byTensor;
    }

    /**
     * The logits {@code [B, N, vocab]} of token ids {@code [B, N]}: the network's last hidden state (after the
     * final norm) times the head's weights, without the softmax.
     */
    public INDArray logits(INDArray tokens) {
        INDArray in = tokens.castTo(graph.params().dataType()).reshape(tokens.size(0), 1, tokens.size(1));
        Map<String, INDArray> acts = graph.feedForward(new INDArray[] {in}, false, false);
        INDArray h = acts.get("norm");                         // [B, d, N]
        INDArray w = graph.getParam("head_W");                 // [d, V]
        long b = h.size(0);
        long n = h.size(2);
        INDArray rows = h.permute(0, 2, 1).dup('c').reshape(b * n, h.size(1));
        return rows.mmul(w).addiRowVector(graph.getParam("head_b")).reshape(b, n, w.size(1));
    }

    /**
     * {@code count} new tokens after {@code prompt} (one sequence): the prompt in one {@code rnnTimeStep} call, then
     * one call per token, the attention layers answering from their key/value caches. At temperature 0 each token
     * is the most likely one (greedy); above it, tokens are drawn with {@code seed} from the softmax of the logits
     * divided by the temperature, among the {@code topK} most likely (0: all), then among the fewest most likely
     * whose probabilities reach {@code topP}.
     *
     * @throws IllegalArgumentException for an empty prompt, ids outside the vocabulary, or settings out of range
     */
    public long[] generate(long[] prompt, int count, double temperature, int topK, double topP, long seed) {
        if (prompt.length == 0 || count < 1 || temperature < 0 || topK < 0 || !(topP > 0 && topP <= 1)) {
            throw new IllegalArgumentException("generate: needs a prompt, count >= 1, temperature >= 0, topK >= 0 "
                    + "and topP in (0, 1]; got " + prompt.length + " tokens, " + count + ", " + temperature + ", "
                    + topK + ", " + topP);
        }
        java.util.Random rnd = new java.util.Random(seed);
        double[] probabilities = prefill(prompt, count).toDoubleVector();
        long[] out = new long[count];
        for (int i = 0; i < count; i++) {
            out[i] = pick(probabilities, temperature, topK, topP, rnd);
            if (i + 1 < count) {
                probabilities = probabilities(out[i]);
            }
        }
        graph.rnnClearPreviousState();
        return out;
    }

    /**
     * Starts a sequence for decoding: empties the key/value caches, makes room in them for the prompt and
     * {@code room} more tokens, and runs the prompt through the network, {@value #PREFILL_CHUNK} tokens per
     * {@code rnnTimeStep} call (the caches carry the positions on, and the head's output stays {@code [1, vocab,
     * 512]} at most; in one call under dynamic rope scaling, whose theta grows with the length a call sees).
     *
     * @return the next token's distribution {@code [vocab]} after the prompt
     * @throws IllegalArgumentException for an empty prompt or ids outside the vocabulary
     */
    public INDArray prefill(long[] prompt, int room) {
        if (prompt.length == 0 || room < 0) {
            throw new IllegalArgumentException("prefill: needs a prompt and room >= 0, got " + prompt.length
                    + " tokens and " + room);
        }
        for (long id : prompt) {
            checkId(id);
        }
        graph.rnnClearPreviousState();
        tokenStep = null;                                  // it copies the small parameters: take them as they are now
        KeyValueCaches.reserve(graph, prompt.length + room);
        int chunk = config.rope().getScaling() == RotaryEmbedding.Scaling.DYNAMIC ? prompt.length : PREFILL_CHUNK;
        INDArray last = null;
        for (int from = 0; from < prompt.length; from += chunk) {
            int to = Math.min(prompt.length, from + chunk);
            INDArray in = Nd4j.createFromArray(Arrays.copyOfRange(prompt, from, to)).castTo(type())
                    .reshape(1, 1, to - from);
            last = last(graph.rnnTimeStep(in)[0]).dup();
        }
        return last;
    }

    /**
     * One more token after {@link #prefill} (or the last step): the next token's distribution {@code [vocab]}.
     * Computed by {@link TokenStep} from the graph's parameters and caches: what {@code rnnTimeStep} on the one
     * token computes, without DL4J's per-layer overhead, which dominates a step of one token.
     */
    public INDArray step(long token) {
        double[] p = probabilities(token);
        if (type() == DataType.DOUBLE) {
            return Nd4j.createFromArray(p);
        }
        float[] f = new float[p.length];
        for (int i = 0; i < p.length; i++) {
            f[i] = (float) p[i];
        }
        return Nd4j.createFromArray(f);
    }

    /**
     * {@link #step} as a Java array: what {@link #generate} reads. Nothing over the vocabulary runs as an ND4J op
     * here: such an op runs on ND4J's OpenMP threads, which then spin on the other cores while the next step's
     * products want them (measured on 2 cores: an ND4J argmax per token cost about a quarter of the step).
     */
    double[] probabilities(long token) {
        checkId(token);
        if (tokenStep == null) {
            tokenStep = new TokenStep(config, graph);
        }
        return tokenStep.next(token);
    }

    private DataType type() {
        return graph.params().dataType();
    }

    private void checkId(long id) {
        if (id < 0 || id >= config.vocab()) {
            throw new IllegalArgumentException("generate: token ids must be in [0, " + config.vocab() + "), got " + id);
        }
    }

    /** The distribution at the last step of a {@code [1, vocab, n]} output. */
    private static INDArray last(INDArray probabilities) {
        return probabilities.get(org.nd4j.linalg.indexing.NDArrayIndex.point(0), org.nd4j.linalg.indexing.NDArrayIndex.all(),
                org.nd4j.linalg.indexing.NDArrayIndex.point(probabilities.size(2) - 1));
    }

    /**
     * The argmax at temperature 0; else a draw from {@code p^(1/T)} renormalised (softmax of logits / T), among the
     * top-k, then the smallest set of most likely tokens whose probabilities reach top-p.
     */
    private static int pick(double[] p, double temperature, int topK, double topP, java.util.Random rnd) {
        if (temperature == 0) {
            int best = 0;
            for (int i = 1; i < p.length; i++) {
                if (p[i] > p[best]) {
                    best = i;
                }
            }
            return best;
        }
        double max = Arrays.stream(p).max().orElse(1);
        double[] w = new double[p.length];
        for (int i = 0; i < p.length; i++) {
            w[i] = Math.exp((Math.log(p[i]) - Math.log(max)) / temperature);
        }
        Integer[] order = new Integer[p.length];
        Arrays.setAll(order, i -> i);
        Arrays.sort(order, (a, b) -> Double.compare(w[b], w[a]));
        int keep = topK > 0 ? Math.min(topK, p.length) : p.length;
        double total = 0;
        for (int i = 0; i < keep; i++) {
            total += w[order[i]];
        }
        java.util.List<Integer> kept = new java.util.ArrayList<>();
        double mass = 0;
        for (int i = 0; i < keep && (kept.isEmpty() || mass < topP * total); i++) {
            kept.add(order[i]);
            mass += w[order[i]];
        }
        double r = rnd.nextDouble() * mass;
        for (int i : kept) {
            r -= w[i];
            if (r <= 0) {
                return i;
            }
        }
        return kept.get(kept.size() - 1);
    }
}
