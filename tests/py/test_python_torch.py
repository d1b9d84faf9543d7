"""kerncheck.torch on the tiny HF Llama fixture: a golden recorded from transformers equals the golden the
C++ engine records for the same corpus (KL ≤ 1e-6 per position, same top ids), the files interoperate
with the CLI both ways, and rounding a module's output shows up in the judge (KL grows, the verdict turns
to FAIL when the rounding is coarse). Also: the torch bit-op rounding (used on CUDA) equals the core's.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

KC_BIN = os.environ.get("KC_BIN", "kerncheck")
BUILD = Path(os.environ.get("KC_BUILD_DIR", "build"))
DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
TINY = DATA / "fixtures" / "llama-tiny"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kc_env import import_kerncheck, kc, write_tokenizer  # noqa: E402 - the fixture's tokenizer
from test_corpus_record import CODE, PROSE  # noqa: E402


kerncheck = import_kerncheck(BUILD)
import kerncheck.torch  # noqa: E402
K = 8


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("pytorch")
    model_dir = d / "model"
    shutil.copytree(TINY, model_dir)
    write_tokenizer(model_dir / "tokenizer.json")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    corpus = d / "c.kcc"
    kc("corpus", "build", "--tokenizer", model_dir, "--depths", "48,64", "--segments-per-depth", "2",
       "--decode-last", "8", "--prose", d / "prose.txt", "--code", d / "code.py", "-o", corpus)
    g_cpp = d / "g_cpp.safetensors"
    kc("record", "--model", model_dir, "--corpus", corpus, "-k", K, "-o", g_cpp)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    g_py = d / "g_py.safetensors"
    kerncheck.torch.record_golden(model, corpus, g_py, k=K, batch_size=2, progress=False)
    return d, model_dir, model, corpus, g_cpp, g_py


def kl_topk(p_lp, p_other, q_lp, q_other):
    """KL(P‖Q) over the top-k plus the "other" bucket, in float64 (docs/judge.md)."""
    p, q = np.exp(p_lp.astype(np.float64)), np.exp(q_lp.astype(np.float64))
    po, qo = np.exp(p_other.astype(np.float64)), np.exp(q_other.astype(np.float64))
    return (p * (p_lp - q_lp)).sum(-1) + po * (p_other.astype(np.float64) - q_other)


def test_golden_from_transformers_equals_the_engine_golden(setup):
    _, _, _, _, g_cpp, g_py = setup
    a, b = load_file(g_cpp), load_file(g_py)
    assert a.keys() == b.keys()
    for name in ("token", "segment", "depth", "phase", "flags"):
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    kl = kl_topk(a["top_logprobs"], a["other_logprob"], b["top_logprobs"], b["other_logprob"])
    assert kl.shape == (a["token"].shape[0],) and np.abs(kl).max() <= 1e-6, np.abs(kl).max()
    # Same top ids: everywhere the C++ golden separates neighbours by more than f32 noise.
    gap = np.abs(np.diff(a["top_logprobs"], axis=1))
    same = a["top_ids"] == b["top_ids"]
    assert same[:, 0].all() and (same[:, 1:] | (gap < 1e-5)).all()
    np.testing.assert_allclose(b["top_logprobs"], a["top_logprobs"], atol=2e-5)
    np.testing.assert_allclose(b["token_logprob"], a["token_logprob"], atol=2e-5)
    with safe_open(g_cpp, "np") as fa, safe_open(g_py, "np") as fb:
        ma, mb = fa.metadata(), fb.metadata()
    for key in ("kerncheck.format", "k", "vocab", "positions", "model", "tokenizer", "corpus", "segments",
                "kerncheck.corpus_first_tokens"):
        assert ma[key] == mb[key], key
    assert mb["engine"] == "kerncheck.torch"


def test_files_interoperate_with_the_cli(setup):
    d, model_dir, model, _, g_cpp, g_py = setup
    # The C++ engine scores itself against the PyTorch golden …
    c_cpp = d / "c_cpp_vs_py.safetensors"
    kc("record", "--model", model_dir, "--golden", g_py, "-o", c_cpp)
    r = kerncheck.test(g_py, c_cpp, min_positions=100)
    assert r.kl["max"] <= 1e-6 and r.flips["count"] == 0
    # … and kerncheck.torch records a candidate against the C++ golden that the CLI judges.
    c_py = d / "c_py_vs_cpp.safetensors"
    kerncheck.torch.record_candidate(model, g_cpp, c_py, progress=False)
    out = subprocess.run([KC_BIN, "test", g_cpp, c_py, "--min-positions", "100", "--json", d / "t.json"],
                         capture_output=True, text=True)
    assert out.returncode in (0, 2), out.stdout + out.stderr
    r2 = kerncheck.test(g_cpp, c_py, min_positions=100)
    assert r2.kl["max"] <= 1e-6 and r2.flips["count"] == 0
    assert r2.exit_code == out.returncode and r2.verdict in out.stdout


def test_rounding_a_module_output_shows_in_the_judge(setup):
    d, model_dir, model, _, _, g_py = setup
    # Noise floor: the C++ engine, an equally correct f32 implementation of another engine (kerncheck.test()
    # checks the floor's provenance as the CLI does: the engines differ, so the mismatch is accepted and said).
    noise = d / "noise.safetensors"
    if not noise.exists():
        kc("record", "--model", model_dir, "--golden", g_py, "-o", noise)
    results = {}
    for bits in (23, 10, 1):
        cand = d / f"round{bits}.safetensors"
        with kerncheck.torch.round_module_output(model, "model.layers.1.mlp", bits):
            kerncheck.torch.record_candidate(model, g_py, cand, progress=False)
        results[bits] = kerncheck.test(g_py, cand, noise=[noise], min_positions=100, allow_floor_mismatch=True)
        assert results[bits].json["notes"][0].startswith("FLOOR MISMATCH")
    # the hook is gone after the with block: an exact rerun reproduces the golden
    exact = d / "exact.safetensors"
    kerncheck.torch.record_candidate(model, g_py, exact, progress=False)
    assert kerncheck.test(g_py, exact, min_positions=100).kl["max"] <= 1e-9
    kl = {b: r.kl["mean"] for b, r in results.items()}
    assert kl[23] <= 1e-12 < kl[10] < kl[1], kl  # measured: 0, 4.8e-10, 2.5e-6
    assert results[23].verdict in ("PASS", "INCONCLUSIVE"), results[23].text  # few positions here
    assert results[1].verdict == "FAIL" and results[1].kl["mean"] > 1e-6, results[1].text


def test_torch_bit_rounding_equals_the_core():
    g = np.random.default_rng(3)
    bits_pattern = g.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = bits_pattern.view(np.float32).copy()
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 3.4028235e38]
    for bits in (0, 1, 3, 7, 10, 22, 23):
        want = x.copy()
        kerncheck.round_mantissa_(want, bits)
        got = kerncheck.torch.round_mantissa_torch(torch.from_numpy(x), bits).numpy()
        np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(x)], want.view(np.uint32)[~np.isnan(x)])
        assert np.isnan(got[np.isnan(x)]).all()
    # and both are RNE to `bits` mantissa bits: bf16 is 7 bits (ml_dtypes as an independent oracle)
    import ml_dtypes
    fin = x[np.isfinite(x) & (np.abs(x) < 3e38) & (np.abs(x) > 1e-37)]
    want = fin.astype(ml_dtypes.bfloat16).astype(np.float32)
    got = kerncheck.torch.round_mantissa_torch(torch.from_numpy(fin), 7).numpy()
    np.testing.assert_array_equal(got, want)


def test_bad_inputs_raise(setup):
    d, _, model, corpus, g_cpp, _ = setup
    with pytest.raises(ValueError, match="submodule"):
        kerncheck.torch.round_module_output(model, "model.nope", 4)
    with pytest.raises(ValueError, match="bits"):
        kerncheck.torch.round_module_output(model, "model.layers.0", 30)
    with pytest.raises(kerncheck.Error, match="k"):
        kerncheck.torch.record_golden(model, corpus, d / "x.safetensors", k=1, progress=False)
    with pytest.raises(kerncheck.Error):
        kerncheck.torch.record_candidate(model, corpus, d / "y.safetensors", progress=False)  # not a golden
