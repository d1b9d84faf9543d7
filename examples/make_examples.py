#!/usr/bin/env python3
"""Writes the sample tensors of examples/cases.csv (numpy + ml_dtypes; deterministic, ~30 KB).

    .venv/bin/python examples/make_examples.py

Each file case is a "kernel output" (actual) and the golden it should match, in the output dtype:
- silu_bf16:  y = x·sigmoid(x); golden = f64 result rounded once to bf16, actual = computed in bf16 steps.
- gelu_f16:   tanh-GELU in f16; the actual has one NaN where the golden is finite (a kernel bug).
- quant_int8: per-token int8 quantisation; actual uses an f16 scale, so some elements are off by one LSB
              (passes `quant` from examples/spec.toml, would fail `binary`).
"""
import os

import ml_dtypes
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tensors")
bf16 = ml_dtypes.bfloat16


def save(name, arr):
    os.makedirs(OUT, exist_ok=True)
    np.save(os.path.join(OUT, name), arr)


def main():
    rng = np.random.default_rng(20250101)

    # silu, bf16 output [32, 64]
    x = rng.standard_normal((32, 64)).astype(bf16)
    xf = x.astype(np.float64)
    golden = (xf / (1 + np.exp(-xf))).astype(bf16)
    sig = (1 / (1 + np.exp(-x.astype(np.float32)))).astype(bf16)  # a kernel that rounds sigmoid to bf16
    actual = (x.astype(np.float32) * sig.astype(np.float32)).astype(bf16)
    save("silu_golden.npy", golden)
    save("silu_bf16.npy", actual)

    # gelu (tanh form), f16 output [16, 128], one NaN injected
    x = rng.standard_normal((16, 128)).astype(np.float16)
    xf = x.astype(np.float64)
    g = 0.5 * xf * (1 + np.tanh(np.sqrt(2 / np.pi) * (xf + 0.044715 * xf**3)))
    golden = g.astype(np.float16)
    xh = x.astype(np.float16)
    a = (np.float16(0.5) * xh * (np.float16(1) + np.tanh(np.float16(0.7978846) * (xh + np.float16(0.044715) * xh * xh * xh))))
    a = a.astype(np.float16)
    a[3, 17] = np.float16(np.nan)
    save("gelu_golden.npy", golden)
    save("gelu_f16.npy", a)

    # per-token int8 quant [16, 256] of bf16 input
    x = rng.standard_normal((16, 256)).astype(bf16).astype(np.float64)
    scale = np.abs(x).max(axis=1, keepdims=True) / 127
    golden = np.clip(np.rint(x / scale), -127, 127).astype(np.int8)
    scale16 = scale.astype(np.float16).astype(np.float32)
    actual = np.clip(np.rint(x.astype(np.float32) / scale16), -127, 127).astype(np.int8)
    save("quant_golden.npy", golden)
    save("quant_int8.npy", actual)


if __name__ == "__main__":
    main()
