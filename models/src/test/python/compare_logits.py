"""Hugging Face transformers' logits of a model directory against attn4j's, for models attn4j saved.

Usage (in an environment with transformers, PyTorch and numpy; ../shared/anchors/hf-llama/run.sh makes one):

    ./attn4j hf logits --model DIR --tokens T.npy --out OUT
    python models/src/test/python/compare_logits.py DIR T.npy OUT/logits.npy

Loads DIR with AutoModelForCausalLM in float32 (eager attention, as the fixtures' logits were made), computes the
logits of the int64 token ids [B, N] in T.npy and prints one line: the largest absolute difference from attn4j's,
the largest logit, and their ratio. Exits 1 if the ratio is above --tolerance (default 1e-4, the agreement the
fixtures' README expects in float32).
"""
import argparse
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("tokens")
    parser.add_argument("attn4j_logits")
    parser.add_argument("--tolerance", type=float, default=1e-4)
    args = parser.parse_args()

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    tokens = torch.from_numpy(np.load(args.tokens).astype(np.int64))
    with torch.no_grad():
        theirs = model(tokens).logits.numpy()
    ours = np.load(args.attn4j_logits)
    if ours.shape != theirs.shape:
        print(f"shapes differ: attn4j {ours.shape}, transformers {theirs.shape}")
        return 1
    diff = float(np.abs(ours - theirs).max())
    scale = float(np.abs(theirs).max())
    ratio = diff / scale
    rope = getattr(model.config, "rope_parameters", None) or getattr(model.config, "rope_scaling", None)
    print(f"tokens {tuple(tokens.shape)}, rope {rope}, max_position_embeddings "
          f"{model.config.max_position_embeddings}: largest difference {diff:.3e}, largest logit {scale:.3f}, "
          f"ratio {ratio:.3e} (tolerance {args.tolerance:g})")
    return 0 if ratio <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
