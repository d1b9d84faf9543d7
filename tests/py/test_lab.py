"""The precision lab (docs/lab.md): record --variant/--round/--prefill-block and kerncheck trace on the
llama-tiny fixture (random-init, 3 layers; a byte-level tokenizer is written into a copy, as in
test_corpus_record.py).

Independent checks: the judge (kerncheck test) of candidates recorded with variants (f32 → KL exactly 0;
attn=flash → tiny non-zero KL; p=fp8 → larger than p=bf16); trace's errors recomputed with numpy (f64)
from its --dump, and its reference run compared with kc_llama_logits on the same tokens.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from kc_env import kc, log_softmax, write_tokenizer

# The lab tests' token windows were laid out with these merges (no "Ġw").
LAB_MERGES = (("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("Ġ", "a"))

BUILD = Path(os.environ.get("KC_BUILD_DIR", "."))
DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
TINY = DATA / "fixtures" / "llama-tiny"

PROSE = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; "
         "and darkness was upon the face of the deep.\n") * 20
CODE = "".join(f"def g{i}(a, b):\n    return a - {i} * b  # line {i}\n\n" for i in range(80))


def metadata(path):
    with safe_open(str(path), "np") as f:
        return f.metadata()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    d = tmp_path_factory.mktemp("lab")
    model = d / "model"
    shutil.copytree(TINY, model)
    write_tokenizer(model / "tokenizer.json", merges=LAB_MERGES)
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    corpus = d / "c.kcc"
    # Depth 160 with a 32-token decode tail: the prefill crosses two 64-key flash blocks.
    kc("corpus", "build", "--tokenizer", model, "--depths", "96,160", "--segments-per-depth", "2",
       "--decode-last", "32", "--prose", d / "prose.txt", "--code", d / "code.py", "-o", corpus)
    golden = d / "g.safetensors"
    kc("record", "--model", model, "--corpus", corpus, "-k", "8", "-o", golden)
    return d, model, corpus, golden


def judge(golden, cand, tmp):
    out = tmp / (Path(cand).stem + ".json")
    r = kc("test", golden, cand, "--json", out, check=False)
    assert r.returncode in (0, 1, 2), r.stderr
    return json.loads(out.read_text())


def candidate(lab, tmp, name, *flags):
    d, model, corpus, golden = lab
    c = tmp / f"{name}.safetensors"
    kc("record", "--model", model, "--golden", golden, *flags, "-o", c)
    return c


def test_f32_candidate_is_exact(lab, tmp_path):
    golden = lab[3]
    c = candidate(lab, tmp_path, "f32", "--variant", "f32")
    rep = judge(golden, c, tmp_path)
    assert rep["kl"]["max"] == 0 and rep["flips"]["count"] == 0
    assert metadata(c)["variant"] == "f32"
    assert metadata(golden)["kerncheck.golden_reference"] == "f32"
    assert metadata(golden)["variant"] == "f32"


def test_flash_is_a_tiny_normal_difference(lab, tmp_path):
    c = candidate(lab, tmp_path, "flash", "--variant", "attn=flash")
    rep = judge(lab[3], c, tmp_path)
    assert 0 < rep["kl"]["max"] < 1e-6, rep["kl"]
    assert metadata(c)["variant"] == "attn=flash"


def test_p_fp8_worse_than_bf16(lab, tmp_path):
    kl = {}
    for p in ("bf16", "fp8", "fp8x448"):
        c = candidate(lab, tmp_path, p, "--variant", f"p={p}")
        kl[p] = judge(lab[3], c, tmp_path)["kl"]
        assert kl[p]["max"] > 0
    assert kl["fp8"]["mean"] > 4 * kl["bf16"]["mean"], kl
    assert kl["fp8"]["median"] > kl["bf16"]["median"], kl
    # The same P precision through the flash kernel (per-block P against the running max, seed attention_row)
    c = candidate(lab, tmp_path, "flash_fp8", "--variant", "p=fp8+attn=flash")
    kf = judge(lab[3], c, tmp_path)["kl"]
    assert kf["mean"] > 4 * kl["bf16"]["mean"], (kf, kl)


def test_variant_metadata_round_and_prefill_block(lab, tmp_path):
    c = candidate(lab, tmp_path, "r", "--variant", "p=fp8x448+bf16", "--round", "mlp.out=5",
                  "--round", "attn.out@1=7", "--prefill-block", "48")
    md = metadata(c)
    assert md["variant"] == "bf16+p=fp8x448+round:attn.out@1=7+round:mlp.out=5"
    assert md["kerncheck.prefill_block"] == "48"
    assert "--prefill-block 48" in md["command_line"]
    rep = judge(lab[3], c, tmp_path)
    assert rep["kl"]["mean"] > 0
    # Prefill in blocks of 48 on the f32 engine: same math, other GEMM/attention shapes → at most f32 noise.
    c = candidate(lab, tmp_path, "blocks", "--prefill-block", "48")
    assert metadata(c)["kerncheck.prefill_block"] == "48"
    assert judge(lab[3], c, tmp_path)["kl"]["max"] < 1e-6


def test_golden_with_a_variant_says_so(lab, tmp_path):
    d, model, corpus, golden = lab
    g = tmp_path / "g_bf16.safetensors"
    r = kc("record", "--model", model, "--corpus", corpus, "-k", "8", "--variant", "bf16", "-o", g)
    assert "not the f32 reference" in r.stderr
    md = metadata(g)
    assert md["variant"] == "bf16"
    assert md["kerncheck.golden_reference"] == "not the f32 reference: variant bf16"
    # A candidate of the same variant against it: exactly the same numbers (deterministic engine).
    c = tmp_path / "c_bf16.safetensors"
    kc("record", "--model", model, "--golden", g, "--variant", "bf16", "-o", c)
    assert judge(g, c, tmp_path)["kl"]["max"] == 0


@pytest.mark.parametrize("flags,needle", [
    (("--variant", "p=fp9"), "--variant: 'p=fp9': term 'p=fp9': unknown P precision"),
    (("--variant", "bf16+"), "empty term"),
    (("--round", "mlp.out=30"), "BITS must be an integer 0…23"),
    (("--round", "mlp.out"), "missing =BITS"),
    (("--round", "mlp.otu=4"), "round:mlp.otu=4: expected a tensor the model reports"),
    (("--round", "mlp.out@9=4"), "expected a layer < 3"),
    (("--prefill-block", "-2"), "--prefill-block"),
])
def test_bad_variant_flags(lab, tmp_path, flags, needle):
    d, model, corpus, golden = lab
    out = tmp_path / "c.safetensors"
    r = kc("record", "--model", model, "--golden", golden, *flags, "-o", out, check=False)
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith("kerncheck record: error: "), r.stderr
    assert needle in r.stderr, r.stderr
    assert not out.exists()


def test_round_needs_model(lab, tmp_path):
    r = kc("record", "--from-logits", lab[3], "--golden", lab[3], "--round", "x=3", "-o", tmp_path / "c",
           check=False)
    assert r.returncode == 3 and "expected with --model MODEL" in r.stderr


# ---------------------------------------------------------------------------------------------- trace
def rel(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum())


@pytest.fixture(scope="module")
def prompt(lab):
    p = lab[0] / "prompt.txt"
    p.write_text(PROSE[:700])
    return p


def trace(lab, prompt, tmp, variant, *flags):
    j, dump = tmp / f"t-{variant}.json", tmp / f"t-{variant}.safetensors"
    r = kc("trace", "--model", lab[1], "--variant", variant, "--prompt", prompt, "--json", j, "--dump", dump, *flags)
    return r.stdout, json.loads(j.read_text()), load_file(str(dump))


def test_trace_matches_numpy_recomputation(lab, prompt, tmp_path):
    out, rep, dump = trace(lab, prompt, tmp_path, "bf16+p=fp8", "--decode-steps", "3",
                           "--tensors", "attn.out,mlp.out,hidden,attn.ctx")
    T = rep["prompt_tokens"]
    assert T == len(dump["prompt"]) and T > 400
    assert len(rep["decoded"]) == 3 and list(dump["decoded"]) == rep["decoded"]
    assert rep["variant"] == "bf16+p=fp8"
    names = {(t["name"], t["layer"]) for t in rep["tensors"]}
    assert names == {(n, l) for n in ("attn.out", "mlp.out", "hidden", "attn.ctx") for l in range(3)}
    for t in rep["tensors"]:
        key = f"{t['name']}@{t['layer']}"
        a, b = dump[f"var/prefill/{key}"], dump[f"ref/prefill/{key}"]
        assert a.shape == (T, 64 if t["name"] != "attn.ctx" else 64)
        np.testing.assert_allclose(t["prefill"], rel(a, b), rtol=1e-9)
        assert t["prefill"] > 0
        for s in range(3):
            a, b = dump[f"var/decode{s + 1}/{key}"], dump[f"ref/decode{s + 1}/{key}"]
            assert a.shape == (1, 64)
            np.testing.assert_allclose(t["decode"][s], rel(a, b), rtol=1e-9)
        np.testing.assert_allclose(t["decode_mean"], np.mean(t["decode"]), rtol=1e-12)
    for phase, lj in [("prefill", rep["logits"]["prefill"])] + [
            (f"decode{s + 1}", rep["logits"]["decode"][s]) for s in range(3)]:
        a, b = dump[f"var/{phase}/logits"], dump[f"ref/{phase}/logits"]
        np.testing.assert_allclose(lj["rel_err"], rel(a, b), rtol=1e-9)
        lr, lv = log_softmax(b), log_softmax(a)
        np.testing.assert_allclose(lj["kl"], (np.exp(lr) * (lr - lv)).sum(), rtol=1e-6, atol=1e-15)
    # The reference run is the plain engine on the same tokens (kc_llama_logits: prefill then decode).
    toks = np.concatenate([dump["prompt"], dump["decoded"]])
    npy = tmp_path / "l.npy"
    r = subprocess.run([str(BUILD / "tests" / "kc_llama_logits"), str(lab[1]), str(npy), "--decode-from", str(T),
                        *map(str, toks[:T + 2])], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ref = np.load(npy)
    np.testing.assert_array_equal(ref[T - 1], dump["ref/prefill/logits"])
    np.testing.assert_array_equal(ref[T], dump["ref/decode1/logits"])
    np.testing.assert_array_equal(ref[T + 1], dump["ref/decode2/logits"])
    # Greedy: each decoded token is the reference's argmax of the previous position.
    assert rep["decoded"][0] == int(np.argmax(dump["ref/prefill/logits"]))
    assert rep["decoded"][1] == int(np.argmax(dump["ref/decode1/logits"]))
    assert "first attention layer (0) attn.out error" in out


def test_trace_reference_is_zero(lab, prompt, tmp_path):
    out, rep, dump = trace(lab, prompt, tmp_path, "f32", "--decode-steps", "2")
    assert rep["variant"] == "f32"
    assert {t["name"] for t in rep["tensors"]} == {"attn.out", "mlp.out", "hidden"}  # gdn.state: none here
    for t in rep["tensors"]:
        assert t["prefill"] == 0 and t["decode"] == [0, 0]
    assert rep["logits"]["prefill"] == {"rel_err": 0, "kl": 0}


def test_trace_prefill_blocks_and_flash(lab, prompt, tmp_path):
    _, rep, _ = trace(lab, prompt, tmp_path, "attn=flash", "--decode-steps", "1", "--prefill-block", "100")
    for t in rep["tensors"]:
        assert 0 <= t["prefill"] < 1e-5
    assert 0 < rep["logits"]["prefill"]["rel_err"] < 1e-5


@pytest.mark.parametrize("flags,needle", [
    (("--variant", "p=fp9"), "unknown P precision"),
    (("--variant", "f32", "--tensors", "attn.p"), "--tensors: attn.p"),
    (("--variant", "f32", "--tensors", "attn.out,nope"), "--tensors: nope: expected a tensor the model reports"),
    (("--variant", "round:nope=3"), "round:nope=3: expected a tensor the model reports"),
    (("--variant", "f32", "--max-tokens", "10"), "at most 10 tokens"),
    (("--variant", "f32", "--decode-steps", "-1"), "--decode-steps"),
])
def test_trace_refusals(lab, prompt, tmp_path, flags, needle):
    r = kc("trace", "--model", lab[1], "--prompt", prompt, *flags, check=False)
    assert r.returncode == 3, r.stderr
    assert r.stderr.startswith("kerncheck trace: error: ") and needle in r.stderr, r.stderr


def test_trace_against_another_reference(lab, prompt, tmp_path):
    # The seed's attention figures compare P precisions against the bf16 base with P in f32.
    _, rep, _ = trace(lab, prompt, tmp_path, "bf16", "--decode-steps", "1", "--reference", "bf16")
    assert rep["reference"] == "bf16"
    assert all(t["prefill"] == 0 and t["decode"] == [0] for t in rep["tensors"])
    # Reference bf16, variant f32: the variant needs unrounded weights (a fresh load): its run is bitwise
    # the f32 reference run of the opposite comparison.
    _, rep1, d1 = trace(lab, prompt, tmp_path, "f32", "--decode-steps", "1", "--reference", "bf16")
    _, rep2, d2 = trace(lab, prompt, tmp_path, "bf16", "--decode-steps", "1")
    for k in d2:
        if k.startswith("ref/prefill/"):
            np.testing.assert_array_equal(d1["var/prefill/" + k[len("ref/prefill/"):]], d2[k])
            np.testing.assert_array_equal(d2["var/prefill/" + k[len("ref/prefill/"):]],
                                          d1[k])


def test_logits_out_rows_are_the_candidates_logprobs(lab, tmp_path):
    """record --logits-out: full logits [N, vocab] f32 in golden order; their log-softmax (numpy, f64)
    gathered at the golden's ids equals the candidate's log-probs; order=SEED moves them by f32 rounding
    only; logits=bf16 leaves bf16 values."""
    d, model, corpus, golden = lab
    g = load_file(str(golden))
    out = {}
    for v in ("f32", "order=3", "logits=bf16"):
        npy = tmp_path / f"{v}.npy"
        c = candidate(lab, tmp_path, v.replace("=", "_"), "--variant", v, "--logits-out", npy)
        lg = np.load(npy)
        assert lg.dtype == np.float32 and lg.shape[0] == g["top_ids"].shape[0], lg.shape
        x = lg.astype(np.float64)
        lp = x - x.max(1, keepdims=True)
        lp -= np.log(np.exp(lp).sum(1, keepdims=True))
        at = np.take_along_axis(lp, g["top_ids"].astype(np.int64), axis=1)
        cand = load_file(str(c))
        np.testing.assert_allclose(cand["logprobs_at_ref"], at, atol=2e-5)
        out[v] = lg
    assert not np.array_equal(out["order=3"], out["f32"])
    rel = np.linalg.norm(out["order=3"] - out["f32"]) / np.linalg.norm(out["f32"])
    assert 0 < rel < 1e-5, rel
    b = out["logits=bf16"].view(np.uint32)
    assert np.all(b & 0xFFFF == 0)  # bf16 values held in f32


def test_logits_out_refusals(lab, tmp_path):
    d, model, corpus, golden = lab
    r = kc("record", "--model", model, "--corpus", corpus, "--logits-out", tmp_path / "x.npy", "-o",
           tmp_path / "g.safetensors", check=False)
    assert r.returncode == 3 and "--logits-out: expected candidate mode" in r.stderr, r.stderr
