package org.attn4j.models.hf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

import org.attn4j.ops.rope.RotaryEmbedding;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * What attn4j reads from a Hugging Face {@code config.json} of a Llama-family decoder ({@code model_type} llama,
 * mistral or qwen2), in both layouts: transformers 4.x ({@code rope_theta} and {@code rope_scaling} with
 * {@code type} or {@code rope_type}) and 5.x ({@code rope_parameters}).
 *
 * @param modelType             llama, mistral or qwen2
 * @param vocab                 {@code vocab_size}
 * @param hidden                {@code hidden_size}
 * @param intermediate          {@code intermediate_size}
 * @param layers                {@code num_hidden_layers}
 * @param heads                 {@code num_attention_heads}
 * @param kvHeads               {@code num_key_value_heads} (heads when absent)
 * @param headDim               {@code head_dim} (hidden / heads when absent)
 * @param rmsNormEps            {@code rms_norm_eps}
 * @param maxPositions          {@code max_position_embeddings}
 * @param tieWordEmbeddings     {@code tie_word_embeddings}
 * @param qkvBias               q/k/v projection biases: {@code attention_bias} (llama, mistral), always for qwen2
 * @param outputBias            o projection bias: {@code attention_bias} for llama, never for qwen2 and mistral
 * @param mlpBias               {@code mlp_bias}
 * @param slidingWindow         the attention window, 0 for none ({@code sliding_window}; for qwen2 only with
 *                              {@code use_sliding_window})
 * @param rope                  the rotary embedding of the rope settings, its frequencies held in the checkpoint's
 *                              dtype ({@code dtype} or {@code torch_dtype}) as transformers holds them
 * @param json                  the whole file, so that writing keeps what attn4j does not read
 */
public record HfConfig(String modelType, int vocab, int hidden, int intermediate, int layers, int heads, int kvHeads,
                       int headDim, double rmsNormEps, int maxPositions, boolean tieWordEmbeddings, boolean qkvBias,
                       boolean outputBias, boolean mlpBias, int slidingWindow, RotaryEmbedding rope,
                       ObjectNode json) {

    /** The model types this reader maps. */
    public static final List<String> MODEL_TYPES = List.of("llama", "mistral", "qwen2");

    private static final ObjectMapper MAPPER = new ObjectMapper();

    /**
     * Reads {@code dir/config.json}.
     *
     * @throws IOException              if it cannot be read
     * @throws IllegalArgumentException one line naming the file and the key that is missing, of the wrong kind, or
     *                                  not supported (another {@code model_type}, another rope type)
     */
    public static HfConfig read(Path dir) throws IOException {
        Path file = dir.resolve("config.json");
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException(dir + ": no config.json (a Hugging Face model directory holds "
                    + "config.json and model.safetensors)");
        }
        return readFile(file);
    }

    /**
     * Reads a {@code config.json} file of any name (a model's shape without its weights, for example).
     *
     * @throws IOException              if it cannot be read
     * @throws IllegalArgumentException as {@link #read}
     */
    public static HfConfig readFile(Path file) throws IOException {
        if (!Files.isRegularFile(file)) {
            throw new IllegalArgumentException(file + ": no such file");
        }
        JsonNode root;
        try {
            root = MAPPER.readTree(Files.readString(file));
        } catch (IOException e) {
            throw new IllegalArgumentException(file + ": not JSON: " + e.getMessage().lines().findFirst()
                    .orElse(""), e);
        }
        if (root == null || !root.isObject()) {
            throw new IllegalArgumentException(file + ": not a JSON object");
        }
        return of(file.toString(), (ObjectNode) root);
    }

    /** This configuration with {@code layers} decoder layers ({@code num_hidden_layers}), the rest unchanged. */
    public HfConfig withLayers(int layers) {
        if (layers < 1) {
            throw new IllegalArgumentException("layers must be >= 1, got " + layers);
        }
        ObjectNode c = json.deepCopy();
        c.put("num_hidden_layers", layers);
        return of("config with " + layers + " layers", c);
    }

    /**
     * This configuration with its context extended by rotary scaling (what {@code hf finetune --rope-scaling} trains
     * and saves): the rope type and factor, in the layout the file came in ({@code rope_parameters} for transformers
     * 5.x, {@code rope_scaling} for 4.x), with the original {@code max_position_embeddings} kept as
     * {@code original_max_position_embeddings} (llama3 and yarn; llama3 with transformers' default low and high
     * frequency factors 1 and 4) and {@code max_position_embeddings} multiplied by {@code factor}. Dynamic scaling
     * keeps {@code max_position_embeddings}: it is where dynamic NTK starts to scale, by the sequence's length.
     *
     * @throws IllegalArgumentException one line if the type is not linear, dynamic, yarn or llama3, the factor is not
     *                                  above 1, the new length is not a whole number of positions, or the checkpoint
     *                                  already scales its rope
     */
    public HfConfig withRopeScaling(RotaryEmbedding.Scaling type, double factor) {
        if (type == RotaryEmbedding.Scaling.DEFAULT) {
            throw new IllegalArgumentException("rope scaling must be linear, dynamic, yarn or llama3, got default");
        }
        if (!(factor > 1) || Double.isInfinite(factor)) {
            throw new IllegalArgumentException("rope scaling factor must be a number above 1, got " + factor);
        }
        if (rope.getScaling() != RotaryEmbedding.Scaling.DEFAULT) {
            throw new IllegalArgumentException("the checkpoint already scales its rope (" + rope.getScaling().hfName()
                    + ", factor " + rope.getFactor() + "); extend a checkpoint without rope scaling");
        }
        double extended = maxPositions * factor;
        if (type != RotaryEmbedding.Scaling.DYNAMIC && extended != Math.rint(extended)) {
            throw new IllegalArgumentException("rope scaling factor " + factor + " times max_position_embeddings "
                    + maxPositions + " is " + extended + ", not a whole number of positions");
        }
        ObjectNode c = json.deepCopy();
        boolean v5 = c.hasNonNull("rope_parameters");
        ObjectNode p = v5 ? (ObjectNode) c.get("rope_parameters") : c.putObject("rope_scaling");
        p.put("rope_type", type.hfName());
        p.remove("type");
        p.put("factor", factor);
        if (type == RotaryEmbedding.Scaling.LLAMA3 || type == RotaryEmbedding.Scaling.YARN) {
            p.put("original_max_position_embeddings", maxPositions);
        }
        if (type == RotaryEmbedding.Scaling.LLAMA3) {
            p.put("low_freq_factor", 1.0);
            p.put("high_freq_factor", 4.0);
        }
        if (type != RotaryEmbedding.Scaling.DYNAMIC) {
            c.put("max_position_embeddings", (int) extended);
        }
        return of("config with " + type.hfName() + " rope scaling " + factor, c);
    }

    /** The configuration of a parsed {@code config.json}; {@code where} names it in messages. */
    public static HfConfig of(String where, ObjectNode c) {
        String type = text(where, c, "model_type");
        if (!MODEL_TYPES.contains(type)) {
            throw new IllegalArgumentException(where + ": model_type " + type + " is not supported; attn4j reads "
                    + String.join(", ", MODEL_TYPES));
        }
        int hidden = integer(where, c, "hidden_size");
        int heads = integer(where, c, "num_attention_heads");
        int kvHeads = c.hasNonNull("num_key_value_heads") ? integer(where, c, "num_key_value_heads") : heads;
        int headDim = c.hasNonNull("head_dim") ? integer(where, c, "head_dim") : hidden / heads;
        if (heads % kvHeads != 0) {
            throw new IllegalArgumentException(where + ": num_attention_heads " + heads + " must be a multiple of "
                    + "num_key_value_heads " + kvHeads);
        }
        int maxPositions = integer(where, c, "max_position_embeddings");
        boolean attentionBias = c.path("attention_bias").asBoolean(false);
        boolean qwen2 = type.equals("qwen2");
        int window = 0;
        if (c.hasNonNull("sliding_window") && (!qwen2 || c.path("use_sliding_window").asBoolean(false))) {
            window = integer(where, c, "sliding_window");
        }
        return new HfConfig(type, integer(where, c, "vocab_size"), hidden, integer(where, c, "intermediate_size"),
                integer(where, c, "num_hidden_layers"), heads, kvHeads, headDim,
                c.path("rms_norm_eps").asDouble(1e-6), maxPositions,
                c.path("tie_word_embeddings").asBoolean(false), qwen2 || attentionBias,
                !qwen2 && !type.equals("mistral") && attentionBias, c.path("mlp_bias").asBoolean(false), window,
                rope(where, c, headDim, maxPositions), c);
    }

    /**
     * The rotary embedding: from {@code rope_parameters} (5.x) or {@code rope_theta} and {@code rope_scaling} (4.x,
     * the type under {@code rope_type} or the older {@code type}).
     */
    static RotaryEmbedding rope(String where, ObjectNode c, int headDim, int maxPositions) {
        JsonNode p = c.hasNonNull("rope_parameters") ? c.get("rope_parameters") : c.path("rope_scaling");
        double theta = c.hasNonNull("rope_parameters") ? p.path("rope_theta").asDouble(10000)
                : c.path("rope_theta").asDouble(10000);
        String type = p.hasNonNull("rope_type") ? p.get("rope_type").asText() : p.path("type").asText("default");
        RotaryEmbedding.Scaling scaling;
        try {
            scaling = RotaryEmbedding.Scaling.ofHfName(type);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
        }
        double partial = p.hasNonNull("partial_rotary_factor") ? p.get("partial_rotary_factor").asDouble()
                : c.path("partial_rotary_factor").asDouble(1.0);
        // transformers holds the frequencies in the model's dtype: a bfloat16 or float16 model turns by rounded ones
        String dtype = c.hasNonNull("dtype") ? c.get("dtype").asText() : c.path("torch_dtype").asText("float32");
        RotaryEmbedding.FrequencyPrecision precision = switch (dtype) {
            case "bfloat16" -> RotaryEmbedding.FrequencyPrecision.BFLOAT16;
            case "float16" -> RotaryEmbedding.FrequencyPrecision.FLOAT16;
            default -> RotaryEmbedding.FrequencyPrecision.FLOAT64;
        };
        RotaryEmbedding.Builder b = RotaryEmbedding.builder().theta(theta).partialRotaryFactor(partial)
                .maxPositions(maxPositions).frequencyPrecision(precision);
        if (scaling != RotaryEmbedding.Scaling.DEFAULT) {
            if (!p.hasNonNull("factor")) {
                throw new IllegalArgumentException(where + ": rope type " + type + " needs a factor");
            }
            b.scaling(scaling, p.get("factor").asDouble());
            b.originalMaxPositions(p.path("original_max_position_embeddings").asInt(maxPositions));
            b.llama3(p.path("low_freq_factor").asDouble(1), p.path("high_freq_factor").asDouble(4));
            b.yarnBetas(p.path("beta_fast").asDouble(32), p.path("beta_slow").asDouble(1));
            b.attentionFactor(p.hasNonNull("attention_factor") ? p.get("attention_factor").asDouble() : null);
            b.mscale(p.hasNonNull("mscale") ? p.get("mscale").asDouble() : null,
                    p.hasNonNull("mscale_all_dim") ? p.get("mscale_all_dim").asDouble() : null);
            b.truncate(p.path("truncate").asBoolean(true));
        }
        try {
            RotaryEmbedding rope = b.build();
            rope.rotaryDims(headDim);
            return rope;
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(where + ": " + e.getMessage(), e);
        }
    }

    private static String text(String where, ObjectNode c, String key) {
        JsonNode n = c.get(key);
        if (n == null || !n.isTextual()) {
            throw new IllegalArgumentException(where + ": " + key + " must be a string, got " + n);
        }
        return n.asText().toLowerCase(Locale.ROOT);
    }

    private static int integer(String where, ObjectNode c, String key) {
        JsonNode n = c.get(key);
        if (n == null || !n.canConvertToInt() || n.asInt() <= 0) {
            throw new IllegalArgumentException(where + ": " + key + " must be a positive integer, got " + n);
        }
        return n.asInt();
    }
}
