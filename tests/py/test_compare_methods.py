"""The eight comparison methods against an independent numpy implementation of seed 001's formulas.

Each oracle below is written from the seed (tables A/B, close/cosine/requant/quant defaults, cross_check
levels and small-value table), not from the C++. Tensors are written as raw little-endian files and
compared with kc_compare_tool (route() + compare() + the JSON report). Cases sit right at the table
thresholds, so changing a formula or a table value makes a test fail.
"""
import json
import math
import os
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))
TOOL = BUILD / "tests" / "kc_compare_tool"

DT = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64,
    "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2, "int8": np.int8, "int32": np.int32, "uint8": np.uint8,
    "int16": np.int16, "complex64": np.complex64,
}

# ---- seed tables (seed 001) ----------------------------------------------------------------------------
TABLE_A = {  # dtype: (rtol, atol, max_abs_error_limit)
    "float16": (2**-9, 2**-9, 1e-1), "bfloat16": (2**-6, 2**-6, 1.0), "float32": (2**-10, 2**-16, 1e-2),
    "float8_e4m3fn": (2**-2, 2**-4, 1.0), "float8_e5m2": (2**-1, 2**-3, 1e-1),
}
TABLE_B = {"float16": 2**-10, "bfloat16": 2**-7, "float32": 2**-13, "float8_e4m3fn": 2**-3,
           "float8_e5m2": 2**-2}
CLOSE = {"float16": (1e-3, 1e-3), "bfloat16": (1e-3, 1e-3), "float32": (1e-4, 1e-4)}
LEVELS = {"L0": (10, 2, 2), "L1": (5, 1.5, 1.5), "L2": (2, 1.2, 1.2)}
SMALL = {"float16": (2**-11, 2**-16), "bfloat16": (2**-8, 2**-16), "float32": (2**-14, 2**-30)}


def run(a, g, method=None, dtype=None, third=None, extra=(), tmp=None, expect_rc=None):
    dtype = dtype or str(g.dtype)
    files = []
    for k, arr in (("a", a), ("g", g), ("b", third)):
        if arr is None:
            continue
        p = tmp / f"{k}.bin"
        p.write_bytes(np.ascontiguousarray(arr).tobytes())
        files.append(str(p))
    cmd = [str(TOOL), *files, "--dtype", dtype, "--shape", str(g.size)]
    if method:
        cmd += ["--method", method]
    cmd += list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if expect_rc is not None:
        assert r.returncode == expect_rc, (r.returncode, r.stderr)
    if r.returncode == 3:
        return r.returncode, r.stderr
    assert r.returncode in (0, 1), r.stderr
    case = json.loads(r.stdout)["cases"][0]
    assert case["pass"] == (r.returncode == 0)
    return r.returncode, case


def fig(case, name):
    for f in case["figures"]:
        if f["name"] == name:
            return f
    raise KeyError(name)


def num(x):
    return float(x) if not isinstance(x, str) else float(x.replace("nan", "nan"))


def close_to(x, y, rel=1e-12):
    x, y = num(x), num(y)
    if math.isinf(y) or math.isnan(y):
        return x == y or (math.isnan(x) and math.isnan(y))
    return abs(x - y) <= rel * max(abs(y), 1e-300)


# ---- oracle helpers -------------------------------------------------------------------------------------
def special_masks(a, g):
    """(equal_special, mismatch): NaN/NaN and same-sign inf are equal; any other non-finite pair mismatches."""
    both_nan = np.isnan(a) & np.isnan(g)
    same_inf = np.isinf(a) & np.isinf(g) & (a == g)
    eq = both_nan | same_inf
    nonfin = ~np.isfinite(a) | ~np.isfinite(g)
    return eq, nonfin & ~eq


def ulp(dtype, x):
    fi = ml_dtypes.finfo(DT[dtype])
    x = abs(float(x))
    e = fi.minexp if x == 0 else max(math.floor(math.log2(x)), fi.minexp)
    return 2.0 ** (e - fi.nmant)


def oracle_mixed(a, g, dtype, rtol=None, atol=None, limit=None):
    t = TABLE_A.get(dtype, TABLE_A["float32"])
    rtol = t[0] if rtol is None else rtol
    atol = t[1] if atol is None else atol
    limit = t[2] if limit is None else limit
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    eq, mism = special_masks(a64, g64)
    fin = ~(eq | mism)
    d = np.where(fin, np.abs(a64 - g64), 0.0)
    ok = (d <= atol + rtol * np.where(fin, np.abs(g64), 0.0)) & ~mism
    matched = ok.sum() / a.size
    i = int(np.argmax(d))
    lim = max(limit, 32 * ulp(dtype, g64[i]))
    max_abs = math.inf if mism.any() else float(d.max())
    return dict(matched=matched, max_abs=max_abs, limit=lim,
                pass_=bool(matched >= 0.99 and max_abs <= lim and not mism.any()))


def oracle_stat(a, g, dtype):
    T = TABLE_B.get(dtype, 2**-13)
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    eq, mism = special_masks(a64, g64)
    if mism.any():
        return dict(pass_=False, mere=None, mare=None, T=T)
    fin = ~eq
    rel = np.where(fin, np.abs(a64 - g64) / (np.abs(np.where(fin, g64, 0)) + 1e-7), 0.0)
    mere, mare = rel.mean(), rel.max()
    return dict(pass_=bool(mere < T and mare < 10 * T), mere=mere, mare=mare, T=T)


def oracle_close(a, g, rtol, ptol, atol=1e-8):
    a64, g64 = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64), g.astype(
        np.complex128 if np.iscomplexobj(g) else np.float64)
    ok = np.isclose(a64, g64, rtol=rtol, atol=atol, equal_nan=True)
    frac = 1 - ok.sum() / a.size
    if np.iscomplexobj(a):
        mism = np.zeros(a.shape, bool)
    else:
        mism = special_masks(a64, g64)[1]
    return dict(frac=frac, pass_=bool(frac <= ptol and not mism.any()))


def oracle_cosine(a, g, rtol=0.01):
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    eq, mism = special_masks(a64, g64)
    a64, g64 = np.where(eq | mism, 0, a64), np.where(eq | mism, 0, g64)
    na, ng = np.linalg.norm(a64), np.linalg.norm(g64)
    if na == 0 and ng == 0:
        c = 1.0
    elif na == 0 or ng == 0:
        c = 0.0
    else:
        c = float(np.dot(a64, g64) / (na * ng))
    return dict(cos=c, pass_=bool(1 - c <= rtol and not mism.any()))


# ---- mixed ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_mixed_random_matches_oracle_and_table(dtype, tmp_path):
    rng = np.random.default_rng(1)
    g64 = rng.standard_normal(20000) * np.exp(rng.uniform(-6, 6, 20000))
    g = g64.astype(DT[dtype])
    a = (g.astype(np.float64) * (1 + rng.standard_normal(20000) * 2e-3)).astype(DT[dtype])
    rc, case = run(a, g, "mixed", dtype, tmp=tmp_path)
    o = oracle_mixed(a, g, dtype)
    assert case["params"]["rtol"] == TABLE_A[dtype][0]
    assert case["params"]["atol"] == TABLE_A[dtype][1]
    assert case["params"]["max_abs_error_limit"] == TABLE_A[dtype][2]
    assert close_to(fig(case, "matched_ratio")["value"], o["matched"])
    assert close_to(fig(case, "max_abs_error")["value"], o["max_abs"])
    assert close_to(fig(case, "max_abs_error")["limit"], o["limit"])
    assert case["pass"] == o["pass_"]


def test_mixed_f32_rtol_threshold(tmp_path):
    # d = 2^-10 + 2^-17 at |g| = 1: within atol + rtol·|g| for rtol = 2^-10 (atol 2^-16), not for 2^-11.
    g = np.ones(1000, np.float32)
    a = (g + np.float32(2**-10 + 2**-17)).astype(np.float32)
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 0 and fig(case, "matched_ratio")["value"] == 1.0
    # Just above atol + rtol·|g| (2^-10 + 2^-16): every element fails.
    a = (g + np.float32(2**-10 + 2**-16 + 2**-20)).astype(np.float32)
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 1 and fig(case, "matched_ratio")["value"] == 0.0
    assert oracle_mixed(a, g, "float32")["pass_"] is False


def test_mixed_bf16_atol_threshold(tmp_path):
    # Golden 0: the element passes iff |a| ≤ atol = 2^-6 (bf16 row).
    g = np.zeros(100, ml_dtypes.bfloat16)
    rc, _ = run(np.full(100, 2**-6, ml_dtypes.bfloat16), g, "mixed", tmp=tmp_path)
    assert rc == 0
    rc, _ = run(np.full(100, 2**-6 + 2**-13, ml_dtypes.bfloat16), g, "mixed", tmp=tmp_path)
    assert rc == 1


def test_mixed_matched_ratio_099_boundary(tmp_path):
    g = np.ones(1000, np.float32)
    a = g.copy()
    a[:10] = 1.005  # 1 % of elements out of tolerance, max abs error 0.005 < 1e-2
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 0 and fig(case, "matched_ratio")["value"] == 0.99
    a[10] = 1.005
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 1 and fig(case, "matched_ratio")["value"] == 0.989


def test_mixed_limit_table_or_32ulp(tmp_path):
    # f32 at |g| = 2^20: ulp = 2^-3, 32 ULP = 4 > table limit 1e-2; rtol·|g| = 1024 keeps the ratio at 1.
    g = np.full(200, 2.0**20, np.float32)
    a = g.copy()
    a[7] += 3.5  # > 1e-2 but ≤ 32 ULP → passes
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 0 and fig(case, "max_abs_error")["limit"] == 4.0
    a[7] = g[7] + 4.5  # > 32 ULP and > table → fails
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 1 and case["reason"].startswith("max_abs_error")
    # Small values: the table limit decides (32 ULP of 0.5 is tiny).
    g = np.full(200, 0.5, np.float32)
    a = g.copy()
    a[3] = 0.5 + 0.0099
    a[4] = 0.5 - 0.0099
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 0 and fig(case, "max_abs_error")["limit"] == 1e-2
    a[4] = 0.5 + 0.0101
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    assert rc == 1


def test_mixed_min_passing_scale(tmp_path):
    rng = np.random.default_rng(2)
    g = rng.standard_normal(5000).astype(np.float32)
    a = (g * (1 + rng.standard_normal(5000).astype(np.float32) * 3e-3)).astype(np.float32)
    rc, case = run(a, g, "mixed", tmp=tmp_path)
    rtol, atol = TABLE_A["float32"][:2]
    d = np.abs(a.astype(np.float64) - g)
    s = np.sort(d / (atol + rtol * np.abs(g.astype(np.float64))))
    exact = s[math.ceil(0.99 * g.size) - 1]
    reported = float(case["min_passing"].split("scaled by ")[1].split()[0])
    assert exact * (1 - 1e-3) <= reported <= exact * 2 ** (1 / 16) * 1.001


# ---- special values -----------------------------------------------------------------------------------------
def test_special_values_classes(tmp_path):
    g = np.array([1, np.nan, np.inf, -np.inf, np.nan, 1, 2, np.inf, 5, 0.0, -0.0], np.float32)
    a = np.array([1, np.nan, np.inf, np.inf, 3, np.nan, np.inf, 7, 5, -0.0, 0.0], np.float32)
    for method in ["mixed", "stat_rel_err", "close", "cosine"]:
        rc, case = run(a, g, method, tmp=tmp_path)
        assert rc == 1, method
        classes = {c["name"]: (c["count"], c["first_indices"]) for c in case["nonfinite"]["classes"]}
        assert classes == {
            "golden NaN, actual not NaN": (1, [4]),
            "actual NaN, golden not NaN": (1, [5]),
            "actual inf, golden finite": (1, [6]),
            "golden inf, actual finite": (1, [7]),
            "inf of opposite sign": (1, [3]),
        }, method
        assert case["nonfinite"]["mismatches"] == 5
    _, case = run(a, g, "stat_rel_err", tmp=tmp_path)
    assert [f["name"] for f in case["figures"]] == ["nonfinite_mismatches"]  # mere/mare not computed
    # Only matching specials and ±0: equal everywhere.
    keep = [0, 1, 2, 8, 9, 10]
    for method in ["mixed", "stat_rel_err", "close", "cosine", "binary"]:
        rc, case = run(a[keep], g[keep], method, tmp=tmp_path)
        assert rc == (1 if method == "binary" else 0), method  # ±0 differ bitwise


# ---- stat_rel_err -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_stat_rel_err_random(dtype, tmp_path):
    rng = np.random.default_rng(3)
    g = (rng.standard_normal(30000) * 4).astype(DT[dtype])
    g[::97] = 0  # zeros in golden: rel = |a|/1e-7
    a = (g.astype(np.float64) * (1 + rng.standard_normal(30000) * 1e-4)).astype(DT[dtype])
    rc, case = run(a, g, "stat_rel_err", tmp=tmp_path)
    o = oracle_stat(a, g, dtype)
    assert case["params"]["threshold"] == TABLE_B[dtype]
    assert close_to(fig(case, "mere")["value"], o["mere"], 1e-11)
    assert close_to(fig(case, "mare")["value"], o["mare"])
    assert fig(case, "mare")["limit"] == 10 * TABLE_B[dtype]
    assert case["pass"] == o["pass_"]


def test_stat_rel_err_f32_threshold(tmp_path):
    T = 2**-13
    g = np.ones(1000, np.float32)
    # Every rel = 2^-14·(1+small): mere < T passes; mare < 10T.
    a = (g + np.float32(2**-14)).astype(np.float32)
    rc, case = run(a, g, "stat_rel_err", tmp=tmp_path)
    assert rc == 0 and oracle_stat(a, g, "float32")["pass_"]
    # rel = 2^-13 exactly-ish (above T because of 1e-7): mere ≥ T → FAIL (would pass with T = 2^-12).
    a = (g + np.float32(2**-13 + 2**-20)).astype(np.float32)
    rc, case = run(a, g, "stat_rel_err", tmp=tmp_path)
    assert rc == 1 and case["reason"].startswith("mere")
    # One outlier: mean stays tiny, max ≥ 10·T → FAIL by mare.
    a = g.copy()
    a[0] = 1 + 10 * T * 1.01
    rc, case = run(a, g, "stat_rel_err", tmp=tmp_path)
    assert rc == 1 and case["reason"].startswith("mare")
    a[0] = 1 + 10 * T * 0.99
    rc, case = run(a, g, "stat_rel_err", tmp=tmp_path)
    assert rc == 0
    tp = float(case["min_passing"].split()[1])
    o = oracle_stat(a, g, "float32")
    assert tp >= max(o["mere"], o["mare"] / 10) and tp <= max(o["mere"], o["mare"] / 10) * (1 + 1e-12)


# ---- close -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_close_random(dtype, tmp_path):
    rng = np.random.default_rng(4)
    g = rng.standard_normal(20000).astype(DT[dtype])
    a = (g.astype(np.float64) * (1 + rng.standard_normal(20000) * 3e-4)).astype(DT[dtype])
    rtol, ptol = CLOSE[dtype]
    rc, case = run(a, g, "close", tmp=tmp_path)
    o = oracle_close(a, g, rtol, ptol)
    assert case["params"] == {"rtol": rtol, "atol": 1e-8, "ptol": ptol}
    assert close_to(fig(case, "mismatch_fraction")["value"], o["frac"])
    assert case["pass"] == o["pass_"]


def test_close_ptol_boundary_f32(tmp_path):
    g = np.ones(10000, np.float32)
    a = g.copy()
    a[:1] = 1.001  # 1 of 10000 = ptol 1e-4 → PASS
    rc, _ = run(a, g, "close", tmp=tmp_path)
    assert rc == 0
    a[1] = 1.001
    rc, _ = run(a, g, "close", tmp=tmp_path)
    assert rc == 1
    # rtol 1e-4 at |g| = 1: 1 + 0.9e-4 inside, 1 + 1.2e-4 outside
    a = np.full(10000, 1 + 0.9e-4, np.float32)
    assert run(a, g, "close", tmp=tmp_path)[0] == 0
    a = np.full(10000, 1 + 1.2e-4, np.float32)
    assert run(a, g, "close", tmp=tmp_path)[0] == 1


def test_close_complex64(tmp_path):
    rng = np.random.default_rng(5)
    g = (rng.standard_normal(4000) + 1j * rng.standard_normal(4000)).astype(np.complex64)
    a = (g * (1 + 5e-5 * rng.standard_normal(4000))).astype(np.complex64)
    rc, case = run(a, g, "close", "complex64", tmp=tmp_path)
    o = oracle_close(a, g, 1e-4, 1e-4)
    assert close_to(fig(case, "mismatch_fraction")["value"], o["frac"])
    assert case["pass"] == o["pass_"]


# ---- cosine ------------------------------------------------------------------------------------------------
def test_cosine(tmp_path):
    rng = np.random.default_rng(6)
    g = rng.standard_normal(10000).astype(np.float32)
    for noise, expect in [(0.1, 0), (0.15, 1)]:  # 1 − cos ≈ noise²/2: 0.005 passes, 0.011 fails
        a = (g + noise * rng.standard_normal(10000)).astype(np.float32)
        rc, case = run(a, g, "cosine", tmp=tmp_path)
        o = oracle_cosine(a, g)
        assert abs(fig(case, "cosine")["value"] - o["cos"]) < 1e-13
        assert rc == expect and case["pass"] == o["pass_"]
    z = np.zeros(10, np.float32)
    assert run(z, z, "cosine", tmp=tmp_path)[0] == 0  # both zero: cos = 1
    assert run(z, np.ones(10, np.float32), "cosine", tmp=tmp_path)[0] == 1  # one zero: cos = 0


# ---- binary ------------------------------------------------------------------------------------------------
def test_binary(tmp_path):
    g = np.arange(100, dtype=np.int32)
    rc, case = run(g.copy(), g, tmp=tmp_path)  # auto-routed: int32 → binary
    assert rc == 0 and case["method"] == "binary" and case["route_source"].startswith("auto")
    a = g.copy()
    a[[3, 50]] += 1
    rc, case = run(a, g, tmp=tmp_path)
    assert rc == 1 and case["mismatch_indices"] == [3, 50]
    # bf16 NaN payloads: equal by the NaN rule.
    gb = np.array([1, 2, 0x7FC0, 4], np.uint16)
    ab = gb.copy()
    ab[2] = 0x7FC1
    rc, case = run(ab, gb, "binary", "bfloat16", tmp=tmp_path)
    assert rc == 0
    assert fig(case, "sha256_equal")["value"] == 0.0


def test_binary_cross_dtype(tmp_path):
    g = np.array([1, -2, 300, 7], np.int32)
    a8 = np.array([1, -2, 44, 7], np.int8)
    p = tmp_path
    (p / "a.bin").write_bytes(a8.tobytes())
    (p / "g.bin").write_bytes(g.tobytes())
    # Raw files carry one --dtype; use npy for mixed dtypes.
    np.save(p / "a.npy", a8)
    np.save(p / "g.npy", g)
    r = subprocess.run([str(TOOL), str(p / "a.npy"), str(p / "g.npy"), "--method", "binary"], capture_output=True,
                       text=True)
    assert r.returncode == 1
    assert json.loads(r.stdout)["cases"][0]["mismatch_indices"] == [2]
    np.save(p / "a.npy", g.astype(np.int64))
    r = subprocess.run([str(TOOL), str(p / "a.npy"), str(p / "g.npy"), "--method", "binary"], capture_output=True,
                       text=True)
    assert r.returncode == 0
    np.save(p / "a.npy", g.astype(np.float32))
    r = subprocess.run([str(TOOL), str(p / "a.npy"), str(p / "g.npy"), "--method", "binary"], capture_output=True,
                       text=True)
    assert r.returncode == 3 and "integer" in r.stderr


# ---- requant / quant ------------------------------------------------------------------------------------------
def test_requant_int8_view(tmp_path):
    rng = np.random.default_rng(7)
    gc = rng.integers(0, 256, 5000).astype(np.uint8)
    gc[(gc & 0x7F) >= 0x7E] = 0x10  # keep clear of e4m3fn NaN codes 0x7F/0xFF
    ac = gc.copy()
    ac[::100] = (ac[::100].astype(int) + 1) % 0x7E  # ±1 ULP
    ac[5] = gc[5] ^ 0x80  # sign flip: int8-view distance ≥ 128 (seed rule)
    rc, case = run(ac, gc, "requant", "float8_e4m3fn", tmp=tmp_path)
    dist = np.abs(ac.view(np.int8).astype(int) - gc.view(np.int8).astype(int))
    within = (dist <= 1).mean()
    assert close_to(fig(case, "within_1ulp_fraction")["value"], within)
    assert fig(case, "within_1ulp_fraction")["limit"] == 1 - 0.001
    assert case["pass"] == (within >= 1 - 0.001)
    assert fig(case, "max_ulp_distance")["value"] == dist.max()
    # 6 elements beyond 1 ULP in 5000 = 0.0012 > ptol 0.001 → FAIL; 5 → 0.001 → PASS
    ac = gc.copy()
    ac[:5] = gc[:5] ^ 0x80
    assert run(ac, gc, "requant", "float8_e4m3fn", tmp=tmp_path)[0] == 0
    ac[5] = gc[5] ^ 0x80
    assert run(ac, gc, "requant", "float8_e4m3fn", tmp=tmp_path)[0] == 1


def test_hifloat8_auto_routes_to_requant(tmp_path):
    gc = np.arange(1, 100, dtype=np.uint8)
    rc, case = run(gc.copy(), gc, None, "hifloat8", tmp=tmp_path)
    assert rc == 0 and case["method"] == "requant" and case["route_source"] == "auto: hifloat8 → requant"


def test_quant_via_spec(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[per_token_quant.int8]\nstandard = "quant"\nptol = 0.001\n')
    g = np.arange(-100, 100, dtype=np.int8).repeat(10)  # 2000
    a = g.copy()
    a[:50] = np.clip(a[:50].astype(int) + 1, -128, 127)  # 1 LSB: fine
    a[100:102] = a[100:102] + 2  # 2 bad of 2000 = 0.001 → PASS
    ex = ["--spec", str(spec), "--op", "per_token_quant", "--inputs", "float32"]
    rc, case = run(a, g, None, "int8", extra=ex, tmp=tmp_path)
    assert rc == 0 and case["method"] == "quant" and fig(case, "bad_fraction")["value"] == 0.001
    a[102] += 2
    assert run(a, g, None, "int8", extra=ex, tmp=tmp_path)[0] == 1
    # A float method from --compare does not override quant.
    rc, case = run(a, g, "mixed", "int8", extra=ex, tmp=tmp_path)
    assert case["method"] == "quant"
    # quant needs a float input
    assert run(a, g, None, "int8", extra=["--spec", str(spec), "--op", "per_token_quant", "--inputs", "int8"],
               tmp=tmp_path)[0] == 3


# ---- cross_check ---------------------------------------------------------------------------------------------
def oracle_cross(a, g, b, dtype, level="L1"):
    sv, sva = SMALL[dtype]
    u = {"float16": 2**-11, "bfloat16": 2**-8, "float32": 2**-24}[dtype]
    a, g, b = (x.astype(np.float64) for x in (a, g, b))
    large = np.abs(g) >= sv
    ra = np.abs(a - g)[large] / (np.abs(g[large]) + sva)
    rb = np.abs(b - g)[large] / (np.abs(g[large]) + sva)
    mare = ra.max() / max(rb.max(), u)
    mere = ra.mean() / max(rb.mean(), u)
    rmse_a = math.sqrt(np.mean((a - g)[large] ** 2))
    rmse_b = math.sqrt(np.mean((b - g)[large] ** 2))
    rmse = rmse_a / max(rmse_b, u * math.sqrt(np.mean(g[large] ** 2)))
    small = ~large
    ea = int((np.abs(a - g)[small] > sva).sum())
    eb = int((np.abs(b - g)[small] > sva).sum())
    sr = ea / max(eb, 1)
    lm = LEVELS[level]
    return dict(mare=mare, mere=mere, rmse=rmse, small=sr,
                pass_=bool(mare <= lm[0] and mere <= lm[1] and rmse <= lm[2] and sr <= 2.0))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("scale", [1.0, 1.3, 3.0])
def test_cross_check(dtype, scale, tmp_path):
    rng = np.random.default_rng(8)
    g64 = rng.standard_normal(20000)
    g64[:2000] *= 1e-4  # small values
    g = g64.astype(DT[dtype])
    eps = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}[dtype]
    b = (g.astype(np.float64) * (1 + eps * rng.standard_normal(20000))).astype(DT[dtype])
    a = (g.astype(np.float64) * (1 + scale * eps * rng.standard_normal(20000))).astype(DT[dtype])
    for level in ["L1", "L2"]:
        rc, case = run(a, g, "cross_check", dtype, third=b, extra=["--level", level], tmp=tmp_path)
        o = oracle_cross(a, g, b, dtype, level)
        assert case["params"]["mare_ratio_limit"] == LEVELS[level][0]
        assert case["params"]["small_value"] == SMALL[dtype][0]
        assert case["params"]["small_value_atol"] == SMALL[dtype][1]
        for k in ["mare", "mere", "rmse"]:
            assert close_to(fig(case, k + "_ratio")["value"], o[k], 1e-11), k
        assert close_to(fig(case, "small_error_ratio")["value"], o["small"])
        assert case["pass"] == o["pass_"]


def test_cross_check_rejects_other_dtypes(tmp_path):
    g = np.ones(10, np.float64)
    assert run(g, g, "cross_check", third=g, tmp=tmp_path)[0] == 3


# ---- determinism and thread counts ------------------------------------------------------------------------
def test_same_result_any_thread_count(tmp_path):
    rng = np.random.default_rng(9)
    g = rng.standard_normal(300000).astype(np.float32)
    a = (g * (1 + rng.standard_normal(300000).astype(np.float32) * 1e-3)).astype(np.float32)
    outs = []
    for t in ["1", "2", "3"]:
        _, case = run(a, g, "stat_rel_err", extra=["--threads", t], tmp=tmp_path)
        outs.append(json.dumps(case, sort_keys=True))
    assert outs[0] == outs[1] == outs[2]


def test_histogram_decades(tmp_path):
    g = np.zeros(8, np.float64)
    a = np.array([0, 1e-13, 1e-12, 1.5e-12, 1e-3, 0.5, 1e3, np.inf])
    _, case = run(a, g, "mixed", "float64", tmp=tmp_path)
    h = dict(zip(case["histogram"]["edges"], case["histogram"]["counts"]))
    assert h["0"] == 1 and h["<=1e-12"] == 2 and h["<=1e-11"] == 1 and h["<=0.001"] == 1
    assert h["<=1"] == 1 and h[">100"] == 2
