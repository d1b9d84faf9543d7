"""kerncheck (Python) tensor level: compare / assert_close agree with `kerncheck compare --json` on the same
tensors; TestSpec plugins route as seed 001 says; Python op candidates are compared with the C++ f64
reference; unsupported dtypes and layouts raise clean Python exceptions.

The package comes from the build tree ($KC_BUILD_DIR/python: the extension plus links to python/kerncheck);
a build configured without it (KC_BUILD_PYTHON=OFF, e.g. the sanitizer build) skips this file.
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

KC_BIN = os.environ.get("KC_BIN", "kerncheck")
from kc_env import import_kerncheck  # noqa: E402
BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))


kerncheck = import_kerncheck(BUILD)
from kerncheck.testing import assert_close  # noqa: E402


def cli_json(tmp_path, actual, golden, *args, third=None):
    """`kerncheck compare A G --json` on the same arrays saved as .npy: (exit code, the case's JSON)."""
    pa, pg = tmp_path / "a.npy", tmp_path / "g.npy"
    np.save(pa, actual)
    np.save(pg, golden)
    extra = []
    if third is not None:
        np.save(tmp_path / "b.npy", third)
        extra = ["--third", tmp_path / "b.npy"]
    # numpy writes ml_dtypes arrays as void types: the CLI needs --dtype for those.
    if actual.dtype.kind == "V" or actual.dtype.name in ("bfloat16",) or "float8" in actual.dtype.name:
        extra += ["--dtype", actual.dtype.name]
    r = subprocess.run([KC_BIN, "compare", pa, pg, "--json", tmp_path / "r.json", *extra, *map(str, args)],
                       capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads((tmp_path / "r.json").read_text())["cases"][0]


def same_facts(py, cli):
    """The Python result carries the CLI's decision and figures (names differ only in the case name)."""
    for key in ("verdict", "method", "route_source", "dtype", "numel", "reason", "params", "figures", "worst",
                "nonfinite", "mismatch_indices", "histogram", "min_passing"):
        assert py.json[key] == cli[key], key


rng = np.random.default_rng(7)


@pytest.mark.parametrize("dtype,method,scale", [
    (np.float32, None, 1e-4),            # mixed, table A f32: passes
    (np.float32, None, 3e-2),            # … and fails
    (np.float16, "stat_rel_err", 1e-3),
    (ml_dtypes.bfloat16, None, 1e-2),
    (ml_dtypes.bfloat16, "cosine", 0.3),
    (ml_dtypes.float8_e4m3fn, None, 0.1),
    (np.float32, "close", 1e-5),
])
def test_compare_agrees_with_cli(tmp_path, dtype, method, scale):
    g = rng.standard_normal((32, 48)).astype(np.float32)
    a = (g * (1 + scale * rng.standard_normal(g.shape))).astype(np.float32)
    g, a = g.astype(dtype), a.astype(dtype)
    rc, cli = cli_json(tmp_path, a, g, *(["--compare", method] if method else []))
    r = kerncheck.compare(a, g, method=method)
    same_facts(r, cli)
    assert r.passed == (rc == 0)
    assert bool(r) == r.passed and r.verdict in r.text and r.reason in r.text


def test_cross_check_and_integers_agree_with_cli(tmp_path):
    g = rng.standard_normal(4096).astype(np.float32)
    a = (g + 1e-5 * rng.standard_normal(g.shape)).astype(np.float32)
    b = (g + 2e-5 * rng.standard_normal(g.shape)).astype(np.float32)
    _, cli = cli_json(tmp_path, a, g, "--compare", "cross_check", third=b)
    same_facts(kerncheck.compare(a, g, method="cross_check", third=b), cli)
    gi = rng.integers(-100, 100, 1000).astype(np.int32)
    ai = gi.copy()
    ai[[3, 500]] += 1
    rc, cli = cli_json(tmp_path, ai, gi)
    r = kerncheck.compare(ai, gi)
    same_facts(r, cli)
    assert rc == 1 and not r.passed and r.method == "binary" and r.mismatch_indices == [3, 500]


def test_torch_tensors_read_in_place():
    torch = pytest.importorskip("torch")
    g = torch.randn(64, 64, dtype=torch.float32)
    a = (g * (1 + 1e-3 * torch.randn(64, 64))).to(torch.bfloat16)
    gb = g.to(torch.bfloat16)
    r_t = kerncheck.compare(a, gb)
    # The same bits through numpy + ml_dtypes: identical result.
    r_n = kerncheck.compare(a.view(torch.int16).numpy().view(ml_dtypes.bfloat16),
                            gb.view(torch.int16).numpy().view(ml_dtypes.bfloat16))
    assert r_t.json["figures"] == r_n.json["figures"] and r_t.dtype == "bfloat16"
    # float8 and packed float4 (low nibble first) torch types.
    f8 = torch.randn(100).to(torch.float8_e4m3fn)
    assert kerncheck.compare(f8, f8).passed
    x = np.array([0.5, -1.0, 6.0, 0.0, 1.5], dtype=ml_dtypes.float4_e2m1fn)
    y = x.copy()
    y[2] = 4.0
    r4 = kerncheck.compare(y, x)
    assert r4.method == "binary" and r4.mismatch_indices == [2] and "float4" in r4.route_source


def test_assert_close_message_has_the_cli_facts(tmp_path):
    g = rng.standard_normal(1000).astype(np.float32)
    a = g.copy()
    a[17] += 0.5
    _, cli = cli_json(tmp_path, a, g)
    with pytest.raises(AssertionError) as e:
        assert_close(a, g)
    msg = str(e.value)
    assert "FAIL" in msg and cli["reason"] in msg and "max_abs_error" in msg and "17" in msg
    assert_close(g, g)  # passes silently
    # torch-style rtol/atol: both or neither; alone they mean torch's rule (close, every element)
    r = assert_close(a, g, rtol=0.0, atol=0.6)
    assert r.method == "close" and r.params["ptol"] == 0 and "torch" in r.route_source
    with pytest.raises(AssertionError, match="close"):
        assert_close(a, g, rtol=0.0, atol=0.4)
    r = kerncheck.compare(a, g, method="mixed", rtol=0.0, atol=0.6)  # with a method: its overrides
    assert r.method == "mixed" and r.params["atol"] == 0.6 and not r.passed  # the 1e-2 limit still holds
    with pytest.raises(ValueError, match="both or neither"):
        assert_close(a, g, rtol=0.1)
    with pytest.raises(AssertionError, match="custom"):
        assert_close(a, g, msg="custom")


class AddTestSpec:
    __spec__ = "add"
    tolerance = {
        "float16": {"standard": "mix_tolerance", "rtol": 0.004},
        "float32": {"standard": "stat_rel_err", "threshold": 0.002},
        "bfloat16": {"standard": "cross_check", "level": "L2"},
        "int8": {"standard": "quant", "ptol": 0.001},
    }


def test_test_spec_routing_follows_the_seed():
    g = rng.standard_normal(256).astype(np.float32)
    a = (g * (1 + 1e-3 * rng.standard_normal(256))).astype(np.float32)
    # (2) the spec's standard for the dtype, with its override
    r = kerncheck.compare(a, g, spec=AddTestSpec)
    assert r.method == "stat_rel_err" and "add.float32" in r.route_source and r.params["threshold"] == 0.002
    # mere ≈ 8e-4 < 0.002: passes with the spec, fails with table B's default 2^-13
    assert r.passed and not kerncheck.compare(a, g, method="stat_rel_err").passed
    # (1) --compare beats the spec
    assert kerncheck.compare(a, g, spec=AddTestSpec, method="cosine").method == "cosine"
    # f16 rtol override read by mixed
    r16 = kerncheck.compare(a.astype(np.float16), g.astype(np.float16), spec=AddTestSpec)
    assert r16.method == "mixed" and r16.params["rtol"] == 0.004
    # (3) automatic by dtype when the spec has no entry: hifloat8 codes → requant, int32 → binary
    codes = rng.integers(0, 256, 64).astype(np.uint8)
    codes[codes == 0x80] = 0
    rh = kerncheck.compare(codes, codes, dtype="hifloat8", spec=AddTestSpec)
    assert rh.method == "requant" and "auto" in rh.route_source and rh.passed
    assert kerncheck.compare(np.arange(5), np.arange(5), spec=AddTestSpec).method == "binary"
    # (4) mixed by default
    assert kerncheck.compare(a, g).method == "mixed"


def test_quant_comes_only_from_a_spec():
    g = rng.integers(-100, 100, 300).astype(np.int8)
    a = g.copy()
    a[:2] += 1  # 1 LSB: allowed by quant
    r = kerncheck.compare(a, g, spec=AddTestSpec)
    assert r.method == "quant" and "add.int8" in r.route_source and r.passed
    a[7] += 3  # 1 element of 300 beyond 1 LSB > ptol 0.001
    assert not kerncheck.compare(a, g, spec=AddTestSpec).passed
    # without the spec an int8 output is binary; quant cannot be asked for with method=
    assert kerncheck.compare(a, g).method == "binary"
    with pytest.raises(ValueError, match="quant"):
        kerncheck.compare(a, g, method="quant")

    class FloatQuantTestSpec:
        __spec__ = "add"
        tolerance = {"float32": {"standard": "quant"}}

    with pytest.raises(kerncheck.Error, match="quant"):
        kerncheck.compare(np.ones(4, np.float32), np.ones(4, np.float32), spec=FloatQuantTestSpec)


def test_plugin_cli_routes_and_runs_python_candidates(tmp_path):
    (tmp_path / "assets.py").write_text(textwrap.dedent("""
        import numpy as np
        import ml_dtypes
        import kerncheck

        class MatmulTestSpec:
            __spec__ = "matmul"
            tolerance = {"bfloat16": {"standard": "stat_rel_err", "threshold": 0.004}}

        class PerTokenQuantTestSpec:
            __spec__ = "per_token_quant"
            tolerance = {"int8": {"standard": "quant", "ptol": 0.001}}

        @kerncheck.candidate("matmul")
        def py_f32acc(a, b):
            # f32 accumulation, like the built-in f32acc
            return (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)

        @kerncheck.candidate("matmul")
        def py_bf16_inputs_sloppy(a, b):
            y = a @ b
            return y * (1 + 0.05)  # a 5 % scale bug

        @kerncheck.candidate("per_token_quant")
        def py_quant(x, out_dtype):
            s = np.abs(x).max(axis=-1, keepdims=True) / 127
            return np.round(x / s)
    """))
    (tmp_path / "cases.csv").write_text(textwrap.dedent("""\
        name,op,shapes,seed,candidate,dtype,compare
        mm_builtin,matmul,32x64;64x16,1,f32acc,,
        mm_python,matmul,32x64;64x16,1,py_f32acc,,
        mm_bug,matmul,32x64;64x16,1,py_bf16_inputs_sloppy,,
        mm_cosine,matmul,32x64;64x16,1,py_f32acc,,cosine
        quant_py,per_token_quant,8x64,3,py_quant,int8,
    """))
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    r = subprocess.run([sys.executable, "-m", "kerncheck", "compare", "-i", tmp_path / "cases.csv", "--plugin",
                        tmp_path / "assets.py", "--json", tmp_path / "py.json"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1, r.stdout + r.stderr  # mm_bug fails
    cases = {c["name"]: c for c in json.loads((tmp_path / "py.json").read_text())["cases"]}
    for n in ("mm_builtin", "mm_python", "mm_bug"):
        assert cases[n]["method"] == "stat_rel_err" and "matmul.bfloat16" in cases[n]["route_source"]
        assert cases[n]["params"]["threshold"] == 0.004
    # the Python f32-accumulating candidate gives the built-in's exact figures (same inputs, same bits
    # up to summation order inside f32 → at most a bf16 rounding difference on a few elements)
    assert cases["mm_python"]["verdict"] == "PASS" and cases["mm_builtin"]["verdict"] == "PASS"
    fb = {f["name"]: f["value"] for f in cases["mm_builtin"]["figures"]}
    fp = {f["name"]: f["value"] for f in cases["mm_python"]["figures"]}
    assert fp.keys() == fb.keys() and all(abs(fp[k] - fb[k]) <= 0.5 * fb[k] + 1e-6 for k in fb)
    # the scale bug: mere ≈ 0.05 > 0.004
    assert cases["mm_bug"]["verdict"] == "FAIL"
    assert abs({f["name"]: f["value"] for f in cases["mm_bug"]["figures"]}["mere"] - 0.05) < 0.01
    # the row's compare column beats the spec; quant from the spec for the int8 output
    assert cases["mm_cosine"]["method"] == "cosine" and "compare column" in cases["mm_cosine"]["route_source"]
    assert cases["quant_py"]["method"] == "quant" and "per_token_quant.int8" in cases["quant_py"]["route_source"]
    assert cases["quant_py"]["verdict"] == "PASS"
    # the text report is the CLI's, with the case line
    assert "mm_bug" in r.stdout and "case: " in r.stdout and "4 passed, 1 failed" in r.stdout

    # The same built-in row through the C++ CLI with the equivalent TOML spec: identical JSON.
    (tmp_path / "spec.toml").write_text('[matmul.bfloat16]\nstandard = "stat_rel_err"\nthreshold = 0.004\n')
    (tmp_path / "one.csv").write_text("name,op,shapes,seed,candidate\nmm_builtin,matmul,32x64;64x16,1,f32acc\n")
    subprocess.run([KC_BIN, "compare", "-i", tmp_path / "one.csv", "--spec", tmp_path / "spec.toml", "--json",
                    tmp_path / "cli.json"], capture_output=True, check=True)
    cli = json.loads((tmp_path / "cli.json").read_text())["cases"][0]
    for key in ("verdict", "method", "params", "figures", "worst", "histogram"):
        assert cli[key] == cases["mm_builtin"][key], key

    # A bad plugin spec is a clean input error (exit 3) naming the class and the field.
    (tmp_path / "bad.py").write_text('class BadTestSpec:\n    __spec__ = "add"\n'
                                     '    tolerance = {"float32": {"standard": "mix_tolerance", "rtol": -1}}\n')
    r = subprocess.run([sys.executable, "-m", "kerncheck", "compare", "-i", tmp_path / "cases.csv", "--plugin",
                        tmp_path / "bad.py"], capture_output=True, text=True, env=env)
    assert r.returncode == 3 and "rtol" in r.stderr and "bad.py" in r.stderr, r.stderr


def test_unsupported_dtype_and_layout_raise_cleanly():
    g = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        kerncheck.compare(g.T[:, ::2], g[:, :2])
    with pytest.raises(TypeError, match="unsupported dtype"):
        kerncheck.compare(np.array(["a", "b"]), np.array(["a", "b"]))
    with pytest.raises(TypeError, match="unsupported dtype"):
        kerncheck.compare(np.ones(4, ml_dtypes.float8_e4m3fnuz), np.ones(4, ml_dtypes.float8_e4m3fnuz))
    with pytest.raises(TypeError, match="expected a numpy array"):
        kerncheck.compare(object(), g)
    with pytest.raises(ValueError, match="big-endian"):
        kerncheck.compare(g.astype(">f4"), g)
    with pytest.raises(kerncheck.Error, match="element"):  # element counts differ: C++ input error
        kerncheck.compare(g, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="dtype"):  # dtype must be the array's own unless raw 8-bit codes
        kerncheck.compare(g, g, dtype="bfloat16")
    torch = pytest.importorskip("torch")
    t = torch.ones(4, 4)
    with pytest.raises(ValueError, match="not contiguous"):
        kerncheck.compare(t.t()[:, ::2], t[:, :2])
    with pytest.raises(TypeError, match="unsupported torch dtype"):
        kerncheck.compare(torch.ones(4, dtype=torch.float8_e4m3fnuz), torch.ones(4, dtype=torch.float8_e4m3fnuz))
    with pytest.raises(ValueError, match="layout"):
        kerncheck.compare(t.to_sparse(), t.to_sparse())


def test_python_compare_refuses_a_shape_mismatch():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(kerncheck.Error, match=r"shape: expected \[4, 3\]"):
        kerncheck.compare(a, a.reshape(4, 3))
    assert kerncheck.compare(a, a.reshape(4, 3), flat=True).passed
    from kerncheck.testing import CloseError, assert_close
    with pytest.raises(CloseError, match="attribute 'shape' do not match"):
        assert_close(a, a.reshape(4, 3))
