package org.attn4j.distributed.plan;

/**
 * The attention layers of a plan.
 *
 * @param batch           sequences per step B, at least 1
 * @param heads           query heads H, at least 1
 * @param kvHeads         key/value heads Hkv, dividing H (GQA/MQA when fewer than H)
 * @param headDim         head dimension D, at least 1
 * @param bytesPerElement bytes of one element on the wire w (2 for bf16/fp16, 4 for fp32)
 * @param layers          attention layers L the times and bytes are summed over, at least 1
 */
public record ModelSpec(int batch, int heads, int kvHeads, int headDim, int bytesPerElement, int layers) {

    /** @throws IllegalArgumentException naming the first value out of range */
    public ModelSpec {
        atLeastOne("--batch", batch);
        atLeastOne("--heads", heads);
        atLeastOne("--kv-heads", kvHeads);
        atLeastOne("--head-dim", headDim);
        atLeastOne("--bytes", bytesPerElement);
        atLeastOne("--layers", layers);
        if (heads % kvHeads != 0) {
            throw new IllegalArgumentException("--heads " + heads + " is not a multiple of --kv-heads " + kvHeads
                    + "; query heads must be a multiple of K/V heads");
        }
    }

    private static void atLeastOne(String name, int value) {
        if (value < 1) {
            throw new IllegalArgumentException(name + " must be >= 1, got " + value);
        }
    }
}
