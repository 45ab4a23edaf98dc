package org.attn4j.samples.plan;

import java.util.Arrays;
import java.util.stream.Collectors;

import org.attn4j.distributed.plan.ModelSpec;

/**
 * The models of the papers' experiments, for {@code attn4j plan --model NAME}: heads, head size and layers from
 * the paper's table, the batch of its experiment, bf16 on the wire (2 bytes). Any field can be overridden.
 */
public enum ModelPreset {

    /** ATTENTION2D table 3; batch 64 (section 4.1). */
    GPT3_760M("gpt3-760m", new ModelSpec(64, 16, 16, 96, 2, 24), "ATTENTION2D table 3, batch 64 (section 4.1)"),
    /** ATTENTION2D table 3; batch 32 (section 4.1). */
    GPT3_2_7B("gpt3-2.7b", new ModelSpec(32, 32, 32, 80, 2, 32), "ATTENTION2D table 3, batch 32 (section 4.1)"),
    /** ATTENTION2D table 3; batch 16 (section 4.1). */
    GPT3_13B("gpt3-13b", new ModelSpec(16, 40, 40, 128, 2, 40), "ATTENTION2D table 3, batch 16 (section 4.1)"),
    /** ATTENTION2D table 3; batch 16 (section 4.3). */
    GPT3_66B("gpt3-66b", new ModelSpec(16, 72, 72, 128, 2, 64), "ATTENTION2D table 3, batch 16 (section 4.3)"),
    /** ATTENTION2D table 3; batch 16 (section 4.3). */
    GPT3_175B("gpt3-175b", new ModelSpec(16, 96, 96, 128, 2, 96), "ATTENTION2D table 3, batch 16 (section 4.3)"),
    /** WallFacer section 3.2.2: hidden 6656 (52 heads of 128), 64 layers, batch 1. */
    LLAMA_30B("llama-30b", new ModelSpec(1, 52, 52, 128, 2, 64),
            "WallFacer section 3.2.2 (hidden 6656 = 52 x 128, 64 layers, batch 1, bf16)"),
    /** WallFacer table 3: 32 heads, hidden 4096, 32 layers; batch 1 (section 4). */
    GPT_7B("gpt-7b", new ModelSpec(1, 32, 32, 128, 2, 32), "WallFacer table 3 (32 heads, hidden 4096, 32 layers)"),
    /** LLaMA-2 7B as in BurstAttention section 4.1: 32 heads of 128, 32 layers; batch 1 (section 4.3). */
    LLAMA2_7B("llama2-7b", new ModelSpec(1, 32, 32, 128, 2, 32), "BurstAttention section 4.1 (LLaMA-2 7B)");

    private final String cliName;
    private final ModelSpec model;
    private final String source;

    ModelPreset(String cliName, ModelSpec model, String source) {
        this.cliName = cliName;
        this.model = model;
        this.source = source;
    }

    /** The name given to {@code --model}. */
    public String cliName() {
        return cliName;
    }

    /** The shape. */
    public ModelSpec model() {
        return model;
    }

    /** Where the shape comes from. */
    public String source() {
        return source;
    }

    /**
     * The preset of a name, ignoring case.
     *
     * @throws IllegalArgumentException naming the known presets
     */
    public static ModelPreset of(String name) {
        for (ModelPreset p : values()) {
            if (p.cliName.equalsIgnoreCase(name.strip())) {
                return p;
            }
        }
        throw new IllegalArgumentException("unknown model preset '" + name + "'; expected one of " + names());
    }

    /** The names, comma separated. */
    public static String names() {
        return Arrays.stream(values()).map(ModelPreset::cliName).collect(Collectors.joining(", "));
    }
}
