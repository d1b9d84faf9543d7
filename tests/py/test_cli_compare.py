"""`kerncheck compare` end to end ($KC_BIN): exit codes, the closing line, --json / --junit, op mode checked
against independent numpy computations (the SplitMix64 + Box–Muller generator re-implemented here, f64
references in numpy), and bad inputs that must each exit 3 with a message naming the file and the field."""

import json
import math
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
KC_BIN = os.environ.get("KC_BIN", str(ROOT / "build" / "src" / "kerncheck"))
EXAMPLES = ROOT / "examples"
bf16 = ml_dtypes.bfloat16

pytestmark = pytest.mark.skipif(not Path(KC_BIN).exists(), reason=f"{KC_BIN} not built")


def kc(*args, cwd=None):
    p = subprocess.run([KC_BIN, "compare", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert p.returncode >= 0, f"crashed with signal {-p.returncode}: {p.stderr}"
    return p


def closing_line(stdout):
    last = stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"(\d+) passed, (\d+) failed", last)
    assert m, f"last line is {last!r}"
    return int(m.group(1)), int(m.group(2))


# --- the generator, re-implemented from its specification in src/opmode/random.h -----------------------
M64 = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def generate_normal(seed, index, n, mean=0.0, std=1.0):
    state = mix((seed + index) & M64)
    out = []

    def unit():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & M64
        return (mix(state) >> 11) * 2.0**-53

    while len(out) < n:
        u1 = 1.0 - unit()
        u2 = unit()
        r = math.sqrt(-2.0 * math.log(u1))
        t = 2.0 * math.pi * u2
        out.append(mean + std * (r * math.cos(t)))
        out.append(mean + std * (r * math.sin(t)))
    return np.array(out[:n])


# --- the README demo --------------------------------------------------------------------------------
def test_examples_mix_of_pass_and_fail(tmp_path):
    js, ju = tmp_path / "r.json", tmp_path / "r.xml"
    p = kc("-i", EXAMPLES / "cases.csv", "--spec", EXAMPLES / "spec.toml", "--json", js, "--junit", ju)
    assert p.returncode == 1, p.stderr
    passed, failed = closing_line(p.stdout)
    assert (passed, failed) == (5, 3)
    doc = json.loads(js.read_text())
    cases = doc["cases"]
    assert len(cases) == 8
    by_name = {c["name"]: c for c in cases}
    for c in cases:
        for key in ("name", "pass", "method", "route_source", "dtype", "numel", "figures", "worst", "where", "kind"):
            assert key in c, key
    assert by_name["per-token quant op (f16 scale)"]["method"] == "quant"
    assert "spec.toml" in by_name["per-token quant op (f16 scale)"]["route_source"]
    assert by_name["attention P fp8 direct vs f32 (third: P bf16)"]["method"] == "cross_check"
    assert by_name["attention P fp8 direct vs f32 (third: P bf16)"]["pass"] is False
    assert by_name["gelu f16 (NaN bug)"]["pass"] is False
    assert by_name["matmul bf16 f32acc"]["pass"] is True
    assert by_name["matmul bf16 f32acc"]["where"].endswith("cases.csv:8")
    root = ET.parse(ju).getroot()
    testcases = root.iter("testcase")
    names = [t.get("name") for t in testcases]
    assert len(names) == 8
    assert len(list(root.iter("failure"))) == 3


def test_without_spec_int8_routes_to_binary_and_fails():
    p = kc("-i", EXAMPLES / "cases.csv")
    assert p.returncode == 1
    assert closing_line(p.stdout) == (3, 5)
    assert "binary, from auto: int8" in p.stdout


def test_two_files_pass_exit_0_and_compare_flag(tmp_path):
    g = np.linspace(-3, 3, 1000).astype(np.float32)
    a = (g * (1 + 1e-6)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "g.npy", g)
    p = kc(tmp_path / "a.npy", tmp_path / "g.npy")
    assert p.returncode == 0, p.stdout + p.stderr
    assert closing_line(p.stdout) == (1, 0)
    p = kc(tmp_path / "a.npy", tmp_path / "g.npy", "--compare", "binary")
    assert p.returncode == 1
    assert "binary, from --compare" in p.stdout


def test_raw_files_with_dtype_and_shape(tmp_path):
    g = np.arange(24, dtype=np.float32).astype(bf16)
    g.tofile(tmp_path / "g.bin")
    g.tofile(tmp_path / "a.bin")
    p = kc(tmp_path / "a.bin", tmp_path / "g.bin", "--dtype", "bf16", "--shape", "4,6")
    assert p.returncode == 0, p.stderr
    assert "bfloat16, 24 elements" in p.stdout


# --- op mode against numpy ---------------------------------------------------------------------------
def test_op_mode_inputs_and_golden_match_numpy(tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("name,op,shapes,seed,dist,candidate\n"
                   "mm,matmul,24x40;40x16,77,\"normal(0.5, 2)\",f32acc\n"
                   "att,attention,3x16;50x16;50x8,5,,p_bf16\n")
    save = tmp_path / "save"
    p = kc("-i", csv, "--save", save)
    assert p.returncode == 0, p.stdout + p.stderr
    a_in = np.load(save / "mm" / "input0.npy").view(bf16)
    b_in = np.load(save / "mm" / "input1.npy").view(bf16)
    # Inputs: the specified generator, rounded to bf16 (ml_dtypes), byte for byte.
    np.testing.assert_array_equal(a_in.view(np.uint16),
                                  generate_normal(77, 0, 24 * 40, 0.5, 2).astype(bf16).reshape(24, 40).view(np.uint16))
    np.testing.assert_array_equal(b_in.view(np.uint16),
                                  generate_normal(77, 1, 40 * 16, 0.5, 2).astype(bf16).reshape(40, 16).view(np.uint16))
    # Golden: the f64 product rounded once to bf16 (numpy's summation order may flip a rare tie).
    ref = a_in.astype(np.float64) @ b_in.astype(np.float64)
    golden = np.load(save / "mm" / "golden.npy").view(bf16).astype(np.float64)
    assert np.mean(golden != ref.astype(bf16).astype(np.float64)) < 0.01
    # Actual: f32 accumulation, then bf16 — within one bf16 ULP of numpy's f32 product.
    actual = np.load(save / "mm" / "actual.npy").view(bf16).astype(np.float64)
    f32 = (a_in.astype(np.float32) @ b_in.astype(np.float32)).astype(bf16).astype(np.float64)
    assert np.all(np.abs(actual - f32) <= np.abs(f32) * 2.0**-7 + 1e-30)

    q = np.load(save / "att" / "input0.npy").view(bf16).astype(np.float64)
    k = np.load(save / "att" / "input1.npy").view(bf16).astype(np.float64)
    v = np.load(save / "att" / "input2.npy").view(bf16).astype(np.float64)
    np.testing.assert_array_equal(q.astype(bf16).view(np.uint16).ravel(),
                                  generate_normal(5, 0, 48).astype(bf16).view(np.uint16))
    s = q @ k.T / math.sqrt(16)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    o = (w / w.sum(axis=1, keepdims=True)) @ v
    golden = np.load(save / "att" / "golden.npy").view(bf16).astype(np.float64)
    assert np.mean(golden != o.astype(bf16).astype(np.float64)) < 0.02
    assert np.max(np.abs(golden - o)) <= np.max(np.abs(o)) * 2.0**-7


def test_same_seed_same_bytes(tmp_path):
    csv = tmp_path / "c.csv"
    csv.write_text("name,op,shapes,seed,candidate\nq,per_token_quant,8x64,9,scale_f16\n")
    kc("-i", csv, "--save", tmp_path / "s1")
    kc("-i", csv, "--save", tmp_path / "s2")
    for f in ("input0.npy", "actual.npy", "golden.npy"):
        assert (tmp_path / "s1" / "q" / f).read_bytes() == (tmp_path / "s2" / "q" / f).read_bytes()
    x = np.load(tmp_path / "s1" / "q" / "input0.npy").view(bf16).astype(np.float64)
    scale = np.abs(x).max(axis=1, keepdims=True) / 127
    np.testing.assert_array_equal(np.load(tmp_path / "s1" / "q" / "golden.npy"),
                                  np.clip(np.rint(x / scale), -127, 127).astype(np.int8))


def test_list_ops():
    p = subprocess.run([KC_BIN, "compare", "--list-ops"], capture_output=True, text=True)
    assert p.returncode == 0
    for name in ("matmul", "softmax", "rmsnorm", "attention", "cast", "per_token_quant", "p_fp8x448"):
        assert name in p.stdout


# --- bad input: exit 3, message names the file and the field, never a crash -------------------------
def _bad(p, *needles):
    assert p.returncode == 3, (p.returncode, p.stdout, p.stderr)
    for n in needles:
        assert n in p.stderr, (n, p.stderr)


def test_truncated_npy(tmp_path):
    src = (EXAMPLES / "tensors" / "gelu_golden.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(src[:len(src) - 100])
    _bad(kc(tmp_path / "t.npy", EXAMPLES / "tensors" / "gelu_golden.npy"), "t.npy")
    (tmp_path / "h.npy").write_bytes(src[:40])
    _bad(kc(tmp_path / "h.npy", EXAMPLES / "tensors" / "gelu_golden.npy"), "h.npy")


def test_malformed_csv(tmp_path):
    c = tmp_path / "bad.csv"
    c.write_text('name,actual,golden\nx,"a.npy,g.npy\n')
    _bad(kc("-i", c), "bad.csv:2:3", "closing '\"'")
    c.write_text("name,actual,golden,speed\nx,a,g,1\n")
    _bad(kc("-i", c), "bad.csv:1:20", "header")
    c.write_text("name,op,shapes,seed\nx,matmul,2x3;3x2,twelve\n")
    _bad(kc("-i", c), "bad.csv:2:18", "column seed")
    c.write_text("name,actual,golden,compare\nx,a,g,quant\n")
    _bad(kc("-i", c), "bad.csv:2:7", "column compare", "spec")


def test_bad_row_aborts_run_after_earlier_cases(tmp_path):
    shutil.copy(EXAMPLES / "tensors" / "silu_bf16.npy", tmp_path / "a.npy")
    c = tmp_path / "c.csv"
    c.write_text("name,actual,golden,dtype\nok,a.npy,a.npy,bf16\nmissing,a.npy,nothere.npy,bf16\nok2,a.npy,a.npy,bf16\n")
    p = kc("-i", c)
    _bad(p, "c.csv:3", "nothere.npy")
    assert "ok: PASS" in p.stdout and "ok2" not in p.stdout


def test_unknown_dtype_and_method(tmp_path):
    g = EXAMPLES / "tensors" / "gelu_golden.npy"
    _bad(kc(g, g, "--dtype", "float7"), "--dtype", "float7")
    _bad(kc(g, g, "--compare", "fuzzy"), "--compare", "fuzzy")
    c = tmp_path / "c.csv"
    c.write_text(f"actual,golden,dtype\n{g},{g},float7\n")
    _bad(kc("-i", c), "c.csv:2", "column dtype", "float7")


def test_quant_without_spec():
    g = EXAMPLES / "tensors" / "quant_golden.npy"
    _bad(kc(g, g, "--compare", "quant"), "quant", "spec")


def test_float_vs_integer_binary(tmp_path):
    np.save(tmp_path / "i.npy", np.arange(10, dtype=np.int8))
    np.save(tmp_path / "f.npy", np.arange(10, dtype=np.float32))
    _bad(kc(tmp_path / "i.npy", tmp_path / "f.npy", "--compare", "binary"), "i.npy", "dtype")


def test_shape_mismatch(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 4), np.float32))
    np.save(tmp_path / "g.npy", np.zeros((3, 5), np.float32))
    _bad(kc(tmp_path / "a.npy", tmp_path / "g.npy"), "a.npy: shape: expected [3, 5]", "got [3, 4]")
    _bad(kc(tmp_path / "a.npy", tmp_path / "g.npy", "--flat"), "a.npy", "element count")
    c = tmp_path / "c.csv"
    c.write_text("op,shapes\nmatmul,4x8;9x2\n")
    _bad(kc("-i", c), "c.csv:2", "op matmul: input b")


def test_usage_errors(tmp_path):
    g = EXAMPLES / "tensors" / "gelu_golden.npy"
    _bad(kc(g), "ACTUAL GOLDEN")
    _bad(kc("-i", EXAMPLES / "cases.csv", g, g), "-i")
    _bad(kc("-i", tmp_path / "none.csv"), "none.csv")
    spec = tmp_path / "s.toml"
    spec.write_text("[matmul.bfloat16]\nstandard = 'nonsense'\n")
    _bad(kc("-i", EXAMPLES / "cases.csv", "--spec", spec), "s.toml")


def test_csv_dtype_reinterprets_unsigned_codes_of_the_same_width(tmp_path):
    """safetensors has no hifloat8 code, so such outputs are stored as U8: a case's `dtype = hifloat8` says
    what the codes mean (same width); without it they are uint8 (binary); a dtype of another width is
    refused (exit 3) instead of being ignored."""
    from safetensors.numpy import save_file
    rng = np.random.default_rng(5)
    g = rng.integers(0x01, 0x60, 64).astype(np.uint8)  # positive finite hifloat8 codes
    a = g.copy()
    a[::7] += 1  # one code step: not bit-equal
    save_file({"out": a}, str(tmp_path / "a.safetensors"))
    save_file({"out": g}, str(tmp_path / "g.safetensors"))
    c = tmp_path / "c.csv"
    c.write_text("name,actual,golden,dtype\nh,a.safetensors,g.safetensors,hifloat8\n")
    p = kc("-i", c)
    assert "hifloat8, 64 elements" in p.stdout, p.stdout + p.stderr
    assert "binary" not in p.stdout.split("\n", 3)[1], p.stdout
    c.write_text("name,actual,golden\nh,a.safetensors,g.safetensors\n")
    p = kc("-i", c)
    assert "uint8, 64 elements" in p.stdout, p.stdout + p.stderr
    c.write_text("name,actual,golden,dtype\nh,a.safetensors,g.safetensors,bfloat16\n")
    _bad(kc("-i", c), "a.safetensors", "dtype", "bfloat16", "uint8")
