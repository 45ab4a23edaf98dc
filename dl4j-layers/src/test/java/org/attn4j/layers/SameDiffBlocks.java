package org.attn4j.layers;

import java.util.Map;

import org.attn4j.ops.samediff.SDAttention;
import org.nd4j.autodiff.samediff.SDVariable;
import org.nd4j.autodiff.samediff.SameDiff;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * The attn4j attention layers rebuilt from SameDiff ops and {@link SDAttention} functions, with the layers'
 * parameter names and math (NCW input {@code [B, nIn, N]}, projections {@code x W + b}, heads {@code [B, H, N, hs]}),
 * for comparing the two on the same weights and for a SameDiff model to train.
 */
final class SameDiffBlocks {

    private SameDiffBlocks() {
    }

    /** Trainable variables named {@code prefix + key} holding copies of the layer's parameters. */
    static Map<String, SDVariable> variables(SameDiff sd, String prefix, Map<String, INDArray> params) {
        Map<String, SDVariable> v = new java.util.LinkedHashMap<>();
        params.forEach((key, value) -> v.put(key, sd.var(prefix + key, value.dup())));
        return v;
    }

    /** {@code x [B, nIn, N]} to rows {@code [B*N, nIn]}. */
    static SDVariable rows(SDVariable x, long nIn) {
        return x.permute(0, 2, 1).reshape(-1, nIn);
    }

    /** Rows {@code [B*N, h*hs]} to heads {@code [B, h, N, hs]}. */
    static SDVariable heads(SDVariable rows, long b, long n, long h, long hs) {
        return rows.reshape(b, n, h, hs).permute(0, 2, 1, 3);
    }

    /** Heads {@code [B, h, N, hs]} to rows {@code [B*N, h*hs]}. */
    static SDVariable merge(SDVariable heads, long b, long n, long width) {
        return heads.permute(0, 2, 1, 3).reshape(b * n, width);
    }

    /** Rows {@code [B*N, f]} to NCW {@code [B, f, N]}. */
    static SDVariable ncw(SDVariable rows, long b, long n, long f) {
        return rows.reshape(b, n, f).permute(0, 2, 1);
    }

    static SDVariable affine(SDVariable in, Map<String, SDVariable> p, String w, String bias) {
        return in.mmul(p.get(w)).add(p.get(bias));
    }

    /** The layer's q, k, v projections of {@code x [B, nIn, N]}, as heads {@code [B, H or Hkv, N, hs]}. */
    static SDVariable[] projections(SDVariable x, AttentionLayerBase c, long b, long n, Map<String, SDVariable> p) {
        int hs = c.effectiveHeadSize();
        SDVariable r = rows(x, c.getNIn());
        return new SDVariable[] {heads(affine(r, p, "Wq", "bq"), b, n, c.getNHeads(), hs),
            heads(affine(r, p, "Wk", "bk"), b, n, c.getNKvHeads(), hs),
            heads(affine(r, p, "Wv", "bv"), b, n, c.getNKvHeads(), hs)};
    }

    /**
     * {@link FlashAttentionLayer} (identity activation): {@code [B, nIn, N]} to {@code [B, nOut, N]}; with a
     * per-step mask {@code [B, N]} (1 = real) the padded keys are hidden and padded steps output 0.
     */
    static SDVariable flash(SameDiff sd, SDVariable x, SDVariable mask, FlashAttentionLayer c, long b, long n,
                            Map<String, SDVariable> p) {
        SDVariable[] qkv = projections(x, c, b, n, p);
        long width = (long) c.getNHeads() * c.effectiveHeadSize();
        SDAttention.Flash f = SDAttention.flash(qkv[0], qkv[1], qkv[2]).causal(c.isCausal())
                .window(c.getSlidingWindow()).scale(c.effectiveScale());
        if (mask != null) {
            f.keyPadding(mask);
        }
        SDVariable z = affine(merge(f.build(null), b, n, width), p, "Wo", "bo");
        if (mask != null) {
            z = z.mul(mask.reshape(b * n, 1));
        }
        return ncw(z, b, n, c.getNOut());
    }

    /**
     * {@link LinearAttentionLayer} (identity activation, causal, learned decay {@code lambda = sigmoid(theta)}):
     * projections, linear attention, RMS norm with gain {@code g}, output projection.
     */
    static SDVariable linear(SameDiff sd, SDVariable x, LinearAttentionLayer c, long b, long n,
                             Map<String, SDVariable> p) {
        SDVariable[] qkv = projections(x, c, b, n, p);
        long width = (long) c.getNHeads() * c.effectiveHeadSize();
        SDVariable lambda = sd.nn.sigmoid(p.get("theta")).reshape(c.getNHeads());
        SDVariable attended = SDAttention.linear(qkv[0], qkv[1], qkv[2]).causal(true).decay(lambda).build(null);
        SDVariable merged = merge(attended, b, n, width);
        SDVariable invRms = sd.math.pow(merged.mul(merged).mean(true, 1).add(LinearAttentionLayer.NORM_EPS), -0.5);
        SDVariable gained = merged.mul(invRms).mul(p.get("g"));
        return ncw(affine(gained, p, "Wo", "bo"), b, n, c.getNOut());
    }
}
