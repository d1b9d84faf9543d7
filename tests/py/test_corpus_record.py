"""kerncheck corpus build/show and record --model (docs/corpus.md) on the llama-tiny fixture.

The fixture has no tokenizer, so the test writes a byte-level BPE tokenizer.json (256 byte tokens and a
few merges, fewer ids than the model's 512 embedding rows: HF checkpoints may pad) into a copy of it.
Checks: golden logprobs equal an independent log-softmax (numpy, f64) of kc_llama_logits' rows for the
same tokens with the same prefill/decode split; a candidate from the same model gives KL exactly 0; an
interrupted run resumes to the same bytes; another model or tokenizer is refused with exit 3.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from kc_env import kc, write_tokenizer

BUILD = Path(os.environ.get("KC_BUILD_DIR", "."))
DATA = Path(os.environ.get("KC_TEST_DATA", Path(__file__).resolve().parents[1] / "data"))
TINY = DATA / "fixtures" / "llama-tiny"

PROSE = ("And it came to pass, when the evening was come, that the wind rose over the water; and they "
         "that were in the ship said one to another, What manner of man is this?\n") * 12
CODE = "".join(f"def f{i}(x, y):\n    return x * {i} + y  # step {i}\n\n" for i in range(60))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    model = d / "model"
    shutil.copytree(TINY, model)
    write_tokenizer(model / "tokenizer.json")
    (d / "prose.txt").write_text(PROSE)
    (d / "code.py").write_text(CODE)
    corpus = d / "c.kcc"
    kc("corpus", "build", "--tokenizer", model, "--depths", "48,64", "--segments-per-depth", "2",
       "--decode-last", "8", "--prose", d / "prose.txt", "--code", d / "code.py", "-o", corpus)
    golden = d / "g.safetensors"
    kc("record", "--model", model, "--corpus", corpus, "-k", "8", "-o", golden)
    return d, model, corpus, golden


def test_corpus_file(setup):
    d, model, corpus, _ = setup
    c = load_file(str(corpus))
    from safetensors import safe_open
    with safe_open(str(corpus), "np") as f:
        md = f.metadata()
    segs = json.loads(md["segments"])
    assert [(s["domain"], s["depth"], s["decode_last"]) for s in segs] == [
        ("prose", 48, 8), ("code", 48, 8), ("prose", 64, 8), ("code", 64, 8)]
    toks = c["tokens"]
    assert len(toks) == sum(s["depth"] + 1 for s in segs)
    # The window's text is the source bytes at byte_offset; the offsets point at each predicted token.
    for s in segs:
        src = (PROSE if s["domain"] == "prose" else CODE).encode()
        text = s["text"].encode()
        assert src[s["byte_offset"]:s["byte_offset"] + len(text)] == text
        assert len(s["offsets"]) == s["depth"] and s["offsets"] == sorted(s["offsets"])
    out = kc("corpus", "show", corpus).stdout
    assert "4 segments" in out and "prose-d48-0" in out


def engine_logprobs(model, window, n_prefill, tmp):
    out = tmp / "l.npy"
    r = subprocess.run([str(BUILD / "tests" / "kc_llama_logits"), str(model), str(out), "--decode-from",
                        str(n_prefill), *map(str, window[:-1])], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    x = np.load(out).astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def test_golden_matches_engine(setup, tmp_path):
    d, model, corpus, golden = setup
    g = load_file(str(golden))
    c = load_file(str(corpus))["tokens"]
    from safetensors import safe_open
    with safe_open(str(golden), "np") as f:
        md = f.metadata()
    segs = json.loads(md["segments"])
    assert md["engine"] == "kerncheck-llama-f32"
    begin = 0
    for i, s in enumerate(segs):
        window = c[begin:begin + s["depth"] + 1]
        begin += s["depth"] + 1
        lp = engine_logprobs(model, window, s["depth"] - 8, tmp_path)
        rows = slice(s["start"], s["start"] + s["depth"])
        assert (g["token"][rows] == window[1:]).all()
        assert (g["phase"][rows] == (np.arange(s["depth"]) >= s["depth"] - 8)).all()
        assert (g["depth"][rows] == np.arange(1, s["depth"] + 1)).all()
        ids = g["top_ids"][rows]
        want_ids = np.argsort(-lp, axis=1, kind="stable")[:, :8]
        assert (ids == want_ids).all()
        np.testing.assert_allclose(g["top_logprobs"][rows], np.take_along_axis(lp, ids, 1), atol=2e-6)
        np.testing.assert_allclose(g["token_logprob"][rows], lp[np.arange(s["depth"]), window[1:]], atol=2e-6)


def test_same_model_candidate_is_exact(setup, tmp_path):
    d, model, corpus, golden = setup
    cand = tmp_path / "c.safetensors"
    kc("record", "--model", model, "--golden", golden, "-o", cand)
    c = load_file(str(cand))
    g = load_file(str(golden))
    assert (c["logprobs_at_ref"] == g["top_logprobs"]).all()
    assert (c["top1_id"] == g["top_ids"][:, 0]).all()
    assert (c["token_logprob"] == g["token_logprob"]).all()
    # The judge on golden vs same-model candidate: KL exactly 0 everywhere, no flips, the same perplexity.
    r = kc("test", golden, cand, "--json", tmp_path / "r.json", check=False)
    assert r.returncode in (0, 2), r.stderr  # PASS, or INCONCLUSIVE for want of a noise floor
    rep = json.loads((tmp_path / "r.json").read_text())
    n = int(g["token"].shape[0])
    assert rep["golden"]["positions"] == n and rep["positions_judged"] == n
    assert rep["kl"]["n"] == n
    for key in ("mean", "median", "p99", "max"):
        assert rep["kl"][key] == 0, (key, rep["kl"])
    assert rep["flips"]["count"] == 0 and rep["flips"]["rate"] == 0
    assert rep["high_margin_flips"]["count"] == 0
    assert all(b["flips"] == 0 for b in rep["flip_rate_by_margin"])
    assert rep["ppl"]["ln_ratio"] == 0 and rep["ppl"]["ref"] == rep["ppl"]["cand"]
    assert rep["delta_p"]["mean"] == 0 and rep["delta_p"]["rms"] == 0
    assert rep["verdict"] in ("PASS", "INCONCLUSIVE")


def test_resume_is_byte_identical(setup, tmp_path):
    d, model, corpus, golden = setup
    # The command line is stored in the file: run both in their own folder with the same relative -o.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cmd = ("record", "--model", model, "--corpus", corpus, "-k", "8", "-o", "g.safetensors")
    r = kc(*cmd, env={"KC_RECORD_STOP_AFTER": "1"}, check=False, cwd=tmp_path / "a")
    assert r.returncode == 3 and "interrupted" in r.stderr
    assert not (tmp_path / "a" / "g.safetensors").exists()
    assert (tmp_path / "a" / "g.safetensors.partial" / "seg-00000.safetensors").exists()
    r = kc(*cmd, env={"KC_RECORD_STOP_AFTER": "2"}, check=False, cwd=tmp_path / "a")
    assert r.returncode == 3 and "(checkpoint)" in r.stderr
    kc(*cmd, cwd=tmp_path / "a")
    kc(*cmd, cwd=tmp_path / "b")
    assert (tmp_path / "a" / "g.safetensors").read_bytes() == (tmp_path / "b" / "g.safetensors").read_bytes()
    assert not (tmp_path / "a" / "g.safetensors.partial").exists()


def test_refusals(setup, tmp_path):
    d, model, corpus, golden = setup
    other = tmp_path / "other"
    shutil.copytree(model, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["rms_norm_eps"] = 1e-5
    (other / "config.json").write_text(json.dumps(cfg))
    r = kc("record", "--model", other, "--golden", golden, "-o", tmp_path / "c.safetensors", check=False)
    assert r.returncode == 3 and "model" in r.stderr
    kc("record", "--model", other, "--golden", golden, "--allow-other-model", "-o", tmp_path / "c.safetensors")
    write_tokenizer(other / "tokenizer.json", extra_merges=[("Ġ", "s")])
    r = kc("record", "--model", other, "--corpus", corpus, "-o", tmp_path / "g2.safetensors", check=False)
    assert r.returncode == 3 and "tokenizer" in r.stderr


def test_hybrid_golden_names_the_hybrid_engine(tmp_path):
    """A golden and a candidate recorded with the Gated DeltaNet hybrid engine say so in their provenance
    (they said kerncheck-llama-f32, the other engine, before issue 18)."""
    hybrid = DATA / "models" / "hybrid-tiny"
    (tmp_path / "prose.txt").write_text(PROSE)
    (tmp_path / "code.py").write_text(CODE)
    kc("corpus", "build", "--tokenizer", hybrid, "--depths", "24", "--segments-per-depth", "2", "--decode-last", "4",
       "--prose", tmp_path / "prose.txt", "--code", tmp_path / "code.py", "-o", tmp_path / "c.kcc")
    kc("record", "--model", hybrid, "--corpus", tmp_path / "c.kcc", "-o", tmp_path / "g.kcg")
    kc("record", "--model", hybrid, "--golden", tmp_path / "g.kcg", "--variant", "bf16", "-o", tmp_path / "b.kcc")
    from safetensors import safe_open
    for f in ("g.kcg", "b.kcc"):
        with safe_open(str(tmp_path / f), "np") as h:
            assert h.metadata()["engine"] == "kerncheck-hybrid-f32", f


# Issue 20: checkpoints are sealed; a damaged or truncated one is discarded (with a note) and recomputed,
# and the result is still byte-identical to an uninterrupted run.
@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_damaged_checkpoint_is_discarded_and_recomputed(setup, tmp_path, damage):
    d, model, corpus, golden = setup
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cmd = ("record", "--model", model, "--corpus", corpus, "-k", "8", "-o", "g.safetensors")
    r = kc(*cmd, env={"KC_RECORD_STOP_AFTER": "2"}, check=False, cwd=tmp_path / "a")
    assert r.returncode == 3 and "interrupted" in r.stderr
    seg = tmp_path / "a" / "g.safetensors.partial" / "seg-00000.safetensors"
    raw = bytearray(seg.read_bytes())
    if damage == "flip":
        raw[len(raw) - 100] ^= 0x04  # a data byte: the file still parses
    else:
        raw = raw[: len(raw) // 2]
    seg.write_bytes(bytes(raw))
    r = kc(*cmd, cwd=tmp_path / "a")
    assert "checkpoint" in r.stderr and "discarded, segment 0 is recomputed" in r.stderr, r.stderr
    assert str(seg) in r.stderr or "seg-00000" in r.stderr
    kc(*cmd, cwd=tmp_path / "b")
    assert (tmp_path / "a" / "g.safetensors").read_bytes() == (tmp_path / "b" / "g.safetensors").read_bytes()


def test_edited_first_tokens_are_refused(setup, tmp_path):
    """corpus_first_tokens decides which tokens record --golden feeds: it is under the checksum."""
    from safetensors import safe_open
    from safetensors.numpy import save_file
    d, model, corpus, golden = setup
    with safe_open(golden, "np") as f:
        meta, t = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    first = json.loads(meta["kerncheck.corpus_first_tokens"])
    meta["kerncheck.corpus_first_tokens"] = json.dumps([(x + 1) % 200 for x in first])
    save_file(t, tmp_path / "g.safetensors", meta)
    r = kc("record", "--model", model, "--golden", tmp_path / "g.safetensors", "-o", tmp_path / "c.safetensors",
           check=False)
    assert r.returncode == 3 and "metadata checksum" in r.stderr and "g.safetensors" in r.stderr, r.stderr
