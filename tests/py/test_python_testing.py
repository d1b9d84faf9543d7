"""kerncheck.testing.assert_close behaves as torch.testing.assert_close where a torch user expects it:
shape and dtype checks, and the headline figures (mismatched elements, greatest absolute and relative
difference at an N-d index) equal those of torch's own message on the same tensors (torch computes them,
not this file). Then kerncheck's figures, a short message with the full report on the exception, and
`__tracebackhide__` (a failing pytest run shows no kerncheck frame).
"""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from kc_env import import_kerncheck  # noqa: E402
BUILD = Path(os.environ.get("KC_BUILD_DIR", "build")).resolve()


kerncheck = import_kerncheck(BUILD)
from kerncheck.testing import CloseError, assert_close  # noqa: E402

HEAD = re.compile(r"Mismatched elements: (\d+) / (\d+) \(([\d.]+)%\)\n"
                  r"Greatest absolute difference: (\S+) at index (\([^)]*\))[^\n]*\n"
                  r"Greatest relative difference: (\S+) at index (\([^)]*\))")


def headline(text):
    m = HEAD.search(text)
    assert m, text
    return int(m[1]), int(m[2]), float(m[3]), float(m[4]), m[5], float(m[6]), m[7]


def torch_message(a, g, **kw):
    with pytest.raises(AssertionError) as e:
        torch.testing.assert_close(a, g, **kw)
    return str(e.value)


def perturbed(shape, n_bad, size, seed, dtype=torch.float32):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal(shape).astype(np.float32)
    a = g.copy()
    idx = rng.choice(g.size, n_bad, replace=False)
    a.flat[idx] += (size * rng.uniform(0.5, 1.5, n_bad)).astype(np.float32)
    return torch.from_numpy(a).to(dtype), torch.from_numpy(g).to(dtype)


def same_headline(ours, theirs):
    o, t = headline(ours), headline(theirs)
    assert o[0:2] == t[0:2], (ours, theirs)  # mismatched count and total
    assert abs(o[2] - t[2]) <= 0.05
    assert o[3] == pytest.approx(t[3], rel=1e-5) and o[4] == t[4]  # greatest |a-e| and its N-d index
    assert o[5] == pytest.approx(t[5], rel=1e-5) and o[6] == t[6]  # greatest |a-e|/|e| and its index


@pytest.mark.parametrize("shape", [(64, 32), (4, 8, 16), (2048,)])
def test_headline_matches_torch_with_tolerances(shape):
    a, g = perturbed(shape, 40, 1e-3, seed=len(shape))
    with pytest.raises(CloseError) as e:
        assert_close(a, g, rtol=1e-5, atol=1e-5)
    same_headline(str(e.value), torch_message(a, g, rtol=1e-5, atol=1e-5))
    assert "(up to 1e-05 allowed)" in str(e.value)


def test_headline_matches_torch_on_bf16_with_kerncheck_tolerances():
    # kerncheck's default for bf16 is mixed with seed 001's rtol/atol; torch given the same rtol/atol
    # counts the same mismatched elements and finds the same greatest differences. torch evaluates
    # isclose in the tensors' dtype (bf16 rounding of atol + rtol*|e| moves edge elements), kerncheck in
    # exact arithmetic: torch gets the bf16 values as float32 (exact), where its arithmetic is exact too.
    a, g = perturbed((64, 32), 400, 0.05, seed=3, dtype=torch.bfloat16)
    with pytest.raises(CloseError) as e:
        assert_close(a, g)
    r = e.value.result
    same_headline(str(e.value), torch_message(a.float(), g.float(), rtol=r.params["rtol"], atol=r.params["atol"]))
    # the headline's count is the one mixed decided on
    assert r.method == "mixed" and headline(str(e.value))[0] == round((1 - r.figure("matched_ratio").value) * 2048)


def test_shape_and_dtype_are_checked_as_torch_does():
    g = torch.randn(64, 32)
    with pytest.raises(AssertionError, match=r"'shape' do not match: \(32, 64\) != \(64, 32\)"):
        assert_close(g.reshape(32, 64), g)
    with pytest.raises(AssertionError, match="shape"):
        torch.testing.assert_close(g.reshape(32, 64), g)
    with pytest.raises(AssertionError, match=r"'dtype' do not match: bfloat16 != float32"):
        assert_close(g.to(torch.bfloat16), g)
    with pytest.raises(AssertionError, match="dtype"):
        torch.testing.assert_close(g.to(torch.bfloat16), g)


def test_check_dtype_false_takes_the_expected_dtype_tolerance():
    # The verdict no longer depends on the argument order's dtype: with an f32 expected the f32 table
    # applies in both orders (bf16 rounding of random data fails f32's), with a bf16 expected bf16's.
    g32 = torch.randn(64, 32)
    g16 = g32.to(torch.bfloat16)
    with pytest.raises(CloseError) as e:
        assert_close(g16, g32, check_dtype=False)
    assert e.value.result.dtype == "float32"
    r = assert_close(g32, g16, check_dtype=False)
    assert r.dtype == "bfloat16" and r.passed


def test_short_message_full_report_on_the_exception():
    a, g = perturbed((64, 32), 40, 1e-3, seed=5)
    with pytest.raises(CloseError) as e:
        assert_close(a, g, rtol=1e-5, atol=1e-5)
    short, err = str(e.value), e.value
    assert short.startswith("Tensor-likes are not close!") and len(short.splitlines()) <= 12
    assert "worst elements" not in short and "worst elements" in err.report and err.result.text.rstrip() in err.report
    with pytest.raises(CloseError) as e2:
        assert_close(a, g, rtol=1e-5, atol=1e-5, full_report=True)
    assert str(e2.value) == err.report
    with pytest.raises(CloseError, match="^mine: Tensor-likes"):
        assert_close(a, g, rtol=1e-5, atol=1e-5, msg=lambda m: "mine: " + m)


def test_mixed_default_says_its_rule_up_front():
    # 15 of 2048 elements off by 0.9 PASS under mixed (>= 99 % matched) only where max_abs_error's limit
    # holds; the failure message states the rule either way.
    a, g = perturbed((64, 32), 15, 0.9, seed=6)
    with pytest.raises(CloseError) as e:
        assert_close(a, g)  # float32: max_abs_error's limit 0.01 fails them
    assert ">= 99% of the elements" in str(e.value) and e.value.result.figure("matched_ratio").ok
    g16 = g.to(torch.bfloat16)
    a16 = g16.clone()
    a16.view(-1)[:15] += 0.9
    r = assert_close(a16, g16)  # bf16: limit 1.0, 99.3 % matched: PASS (docs/python.md says so up front)
    assert r.passed and r.params["max_abs_error_limit"] == 1.0
    with pytest.raises(AssertionError, match="Mismatched elements: 15 / 2048"):
        torch.testing.assert_close(a16, g16)  # where torch differs


def test_inputs_numpy_ml_dtypes_lists_and_noncontiguous():
    g = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    assert_close(g.T, np.ascontiguousarray(g.T))  # non-contiguous: copied
    assert_close(g.astype(ml_dtypes.bfloat16), g.astype(ml_dtypes.bfloat16))
    assert_close(torch.from_numpy(g), g.tolist())  # a list takes the other side's dtype
    assert_close([1.0, 2.0], [1.0, 2.0])
    with pytest.raises(CloseError, match=r"index \(1,\)"):
        assert_close([1.0, 2.5], torch.tensor([1.0, 2.0]), rtol=0.0, atol=0.1)
    # DLPack producer (a torch tensor seen only through __dlpack__)
    class Producer:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, **kw):
            return self.t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    assert_close(Producer(torch.from_numpy(g)), g)


def test_pytest_failure_is_short_and_hides_kerncheck_frames(tmp_path):
    (tmp_path / "test_k.py").write_text(textwrap.dedent("""
        import torch
        from kerncheck.testing import assert_close

        def test_kernel():
            g = torch.linspace(-1, 1, 2048).reshape(64, 32)
            a = g.clone()
            a[9, 13] += 0.5
            assert_close(a, g, rtol=1e-5, atol=1e-5)
    """))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_k.py"], cwd=tmp_path,
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(BUILD / "python")))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "at index (9, 13)" in r.stdout and "Mismatched elements: 1 / 2048" in r.stdout
    assert "kerncheck/testing.py" not in r.stdout and "_compare.py" not in r.stdout, r.stdout
    fail_block = r.stdout.split("___ test_kernel ___")[1].split("short test summary")[0]
    assert len(fail_block.splitlines()) <= 30, r.stdout


# ---- assert_close renders every non-finite figure ------------------------------------------------------------------
def _positions(n):
    return {"first": [0], "middle": [n // 2], "last": [n - 1], "all": list(range(n))}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16])
def test_assert_close_renders_nan_and_inf_everywhere(dtype):
    """Every non-finite value, position class and side: a pass exactly when both hold the same non-finite
    values at the same places (kerncheck counts a NaN against a NaN as matched), else a CloseError whose
    counts are numpy's and whose figures all render; never another exception."""
    n = 16
    cases = 0
    for where, pos in _positions(n).items():
        for va, vg in [(np.nan, None), (None, np.nan), (np.inf, None), (None, -np.inf), (np.nan, np.nan),
                       (np.inf, np.inf), (-np.inf, np.inf), (np.nan, np.inf)]:
            a = np.linspace(0.5, 2.0, n).astype(dtype)
            g = a.copy()
            if va is not None:
                a[pos] = va
            if vg is not None:
                g[pos] = vg
            af, gf = a.astype(np.float64), g.astype(np.float64)
            same = (np.isnan(af) & np.isnan(gf)) | (af == gf)
            bad = int((~same).sum())
            try:
                assert_close(a, g)
                ok = True
            except CloseError as e:
                ok, text = False, str(e)
            cases += 1
            assert ok == (bad == 0), (where, va, vg)
            if not ok:
                assert f"Mismatched elements: {bad} / {n}" in text, text
                assert f"nonfinite_mismatches {bad} <= 0 FAIL" in text, text
                for line in text.splitlines():
                    if line.startswith("Greatest"):
                        float(line.split("difference: ")[1].split(" ")[0])  # a number, nan or inf
    assert cases == 32


def test_compare_figures_are_numbers_even_when_non_finite():
    r = kerncheck.compare(np.array([np.nan, 1.0], np.float32), np.array([1.0, 1.0], np.float32))
    assert all(isinstance(f.value, float) for f in r.figures)
    assert np.isinf(r.figure("max_abs_error").value)
