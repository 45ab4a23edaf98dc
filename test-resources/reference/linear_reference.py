#!/usr/bin/env python3
"""Independent float64 reference vectors for `attn4j check --algo linear`, written with numpy.

Run once by a developer (numpy needed); the vectors are committed, so tests need no Python:
    python3 test-resources/reference/linear_reference.py
Causal: kv_s = lambda kv_(s-1) + k_s v_s^T, o_s = q_s^T kv_s (kv_(-1) = 0), gradients by the reverse
recurrence. Non-causal: O = Q (K^T V). k/v may have fewer heads than q (GQA).
"""
import json
import os

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "linear")


def linear(q, k, v, do, lam, causal):
    b, h, n, d = q.shape
    group = h // k.shape[1]
    o = np.zeros_like(q)
    dq = np.zeros_like(q)
    dk = np.zeros_like(k)
    dv = np.zeros_like(v)
    for bi in range(b):
        for hi in range(h):
            kh = k[bi, hi // group]
            vh = v[bi, hi // group]
            if not causal:
                s = kh.T @ vh
                o[bi, hi] = q[bi, hi] @ s
                g = q[bi, hi].T @ do[bi, hi]
                dq[bi, hi] = do[bi, hi] @ s.T
                dk[bi, hi // group] += vh @ g.T
                dv[bi, hi // group] += kh @ g
                continue
            kv = np.zeros((d, d))
            states = []
            for t in range(n):
                kv = lam * kv + np.outer(kh[t], vh[t])
                states.append(kv.copy())
                o[bi, hi, t] = q[bi, hi, t] @ kv
            grad = np.zeros((d, d))
            for t in reversed(range(n)):
                grad = lam * grad + np.outer(q[bi, hi, t], do[bi, hi, t])
                dq[bi, hi, t] = states[t] @ do[bi, hi, t]
                dk[bi, hi // group, t] += grad @ vh[t]
                dv[bi, hi // group, t] += grad.T @ kh[t]
    return o, dq, dk, dv


def write_case(name, seed, dtype, b, h, hkv, n, d, lam, causal):
    rng = np.random.default_rng(seed)
    q, do = (rng.standard_normal((b, h, n, d)) for _ in range(2))
    k, v = (rng.standard_normal((b, hkv, n, d)) for _ in range(2))
    if dtype == "float32":
        q, k, v, do = (x.astype(np.float32).astype(np.float64) for x in (q, k, v, do))
    outs = linear(q, k, v, do, lam, causal)
    folder = os.path.join(HERE, name)
    os.makedirs(folder, exist_ok=True)
    for key, x in zip(["q", "k", "v", "do"], [q, k, v, do]):
        np.save(os.path.join(folder, key + ".npy"), x.astype(dtype))
    for key, x in zip(["o", "dq", "dk", "dv"], outs):
        np.save(os.path.join(folder, "expected_" + key + ".npy"), x.astype(dtype))
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump({"dtype": dtype, "causal": causal, "decay": lam, "shape": [b, h, hkv, n, d], "seed": seed},
                  f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    write_case("gqa-causal-decay-f64", 4, "float64", 1, 4, 2, 113, 8, 0.95, True)
    write_case("causal-nodecay-f32", 5, "float32", 1, 2, 1, 37, 16, 1.0, True)
    write_case("noncausal-f64", 6, "float64", 1, 2, 2, 29, 8, 1.0, False)
