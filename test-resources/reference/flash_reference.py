#!/usr/bin/env python3
"""Independent float64 reference vectors for `attn4j check --algo flash`, written with numpy.

Run once by a developer (numpy needed); the vectors it writes are committed, so tests need no Python:
    python3 test-resources/reference/flash_reference.py
Each case folder holds the CLI inputs (q, k, v, do), the expected outputs (o, lse, dq, dk, dv) in the
inputs' dtype, and case.json with the flags to pass. Masks follow attn4j's rules: causal j <= i; window W:
causal i - j < W, non-causal |i - j| < W.
"""
import json
import os

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flash")


def attention(q, k, v, do, causal, window, scale):
    b, h, n, d = q.shape
    group = h // k.shape[1]
    kk = np.repeat(k, group, axis=1)  # the reference may repeat K/V; the op must not
    vv = np.repeat(v, group, axis=1)
    s = scale * np.einsum("bhid,bhjd->bhij", q, kk)
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    allowed = np.ones((n, n), dtype=bool)
    if causal:
        allowed &= j <= i
    if window > 0:
        allowed &= (i - j < window) if causal else (np.abs(i - j) < window)
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    lse = (m + np.log(l))[..., 0]
    p = p / l
    o = p @ vv
    dv_full = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(vv, -1, -2)
    delta = (do * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - delta)
    dq = scale * ds @ kk
    dk_full = scale * np.swapaxes(ds, -1, -2) @ q
    dk = dk_full.reshape(b, k.shape[1], group, n, d).sum(axis=2)
    dv = dv_full.reshape(b, k.shape[1], group, n, d).sum(axis=2)
    return o, lse, dq, dk, dv


def write_case(name, seed, dtype, b, h, hkv, n, d, causal, window):
    rng = np.random.default_rng(seed)
    q, do = (rng.standard_normal((b, h, n, d)) for _ in range(2))
    k, v = (rng.standard_normal((b, hkv, n, d)) for _ in range(2))
    if dtype == "float32":  # round inputs first so the reference sees exactly what the op sees
        q, k, v, do = (x.astype(np.float32).astype(np.float64) for x in (q, k, v, do))
    scale = 1.0 / np.sqrt(d)
    outs = attention(q, k, v, do, causal, window, scale)
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    for key, x in zip(["q", "k", "v", "do"], [q, k, v, do]):
        np.save(os.path.join(folder, key + ".npy"), x.astype(dtype))
    for key, x in zip(["o", "lse", "dq", "dk", "dv"], outs):
        np.save(os.path.join(folder, "expected_" + key + ".npy"), x.astype(dtype))
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump({"dtype": dtype, "causal": causal, "window": window, "scale": scale,
                   "shape": [b, h, hkv, n, d], "seed": seed}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    write_case("gqa-causal-f64", 1, "float64", 2, 4, 2, 37, 8, True, 0)
    write_case("mqa-window-f32", 2, "float32", 1, 3, 1, 29, 24, False, 7)
    write_case("causal-window-f64", 3, "float64", 1, 2, 2, 41, 16, True, 9)
